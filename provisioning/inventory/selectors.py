"""Reads of the node inventory: the operator's list and search, a node's facts, history, engine
word and last health, nodes eligible for an order, stock per SKU."""

from __future__ import annotations

from dataclasses import dataclass

from django.db.models import Count, Exists, OuterRef, Q, QuerySet

from portal.catalog.models import ServerSKU
from portal.core.keyset import KeysetPage, keyset_page
from portal.orders.models import Order
from provisioning.drivers import (
    DriverError,
    OptionsSchema,
    driver_for,
    driver_options,
    is_test_host,
    login_user_for,
    node_options,
    options_schema,
)
from provisioning.drivers.ssh import host_key_fingerprints
from provisioning.models import HealthCheck, Node
from provisioning.power import bmc_label
from provisioning.states import (
    NODE_FAILED,
    NodeState,
)


def nodes_for_operator(*, state: str | None = None, sku=None, search: str = "") -> QuerySet[Node]:
    """The inventory list: by state, SKU and a search in hostname, address, SKU and order. Each
    node's health is what its row keeps of the latest check: the list never reads checks. The
    SKUs and the order (by its reference, unique, upper case) are matched in subqueries, not on
    a join over all SKUs and orders."""
    nodes = Node.objects.select_related("sku__gpu", "order").order_by("hostname", "pk")
    if search:
        # Each part a test of the node's own row (SKUs and the order by subquery): on the join,
        # PostgreSQL tested the OR on every node × SKU pair.
        skus = ServerSKU.objects.filter(Q(slug__icontains=search) | Q(name__icontains=search))
        nodes = nodes.filter(Q(hostname__icontains=search) | Q(management_address__icontains=search)
                             | Q(sku__in=skus) | Q(order__in=Order.objects.filter(reference=search.upper())))
    if state:
        nodes = nodes.filter(state=state)
    else:  # retired nodes are out of the fleet: listed only when asked for
        nodes = nodes.exclude(state=NodeState.RETIRED)
    if sku is not None:
        nodes = nodes.filter(sku=sku)
    return nodes


def skus_in_fleet() -> QuerySet[ServerSKU]:
    """SKUs with at least one node (the inventory's filter): a probe of the node index per SKU,
    not a join over every node."""
    return (ServerSKU.objects.filter(Exists(Node.objects.filter(sku=OuterRef("pk"))))
            .select_related("gpu"))


@dataclass(frozen=True)
class NodeFacts:
    """What the node page shows of how Trainyard reaches, powers and cleans a node."""

    schema: OptionsSchema  # what the node's driver reads: which of the facts below apply
    login_user: str
    test_host: bool
    host_key_fingerprints: tuple[str, ...]
    bmc: str  # "IPMI admin@10.0.0.5", "Redfish admin@https://10.0.0.5 (system 1)" or ""
    baseline_entries: int
    option_problems: tuple[str, ...] = ()  # stored before enrolment refused them: read as not stored


def node_facts(node: Node) -> NodeFacts:
    options, schema = driver_options(node), options_schema(node.driver)
    bmc = bmc_label(options)
    return NodeFacts(schema=schema, login_user=login_user_for(node),
                     test_host=is_test_host(node),
                     host_key_fingerprints=host_key_fingerprints(node_options(node).host_key),
                     bmc=bmc, baseline_entries=len(node.baseline or ()),
                     option_problems=tuple(schema.shape_problems(node.driver_options or {})))


def node_engine_word(node: Node) -> str | None:
    """What the node's imaging engine says of it now, for the node page (I/O: one engine call);
    None for a driver without an engine."""
    if not options_schema(node.driver).engine:
        return None
    try:
        check = driver_for(node).engine_check()
    except DriverError as exc:
        return f"the engine did not answer: {exc.message}"
    if check is None:
        return "declared test host: checked over SSH, not through the engine"
    return f"{check.text} ({'free to deploy' if check.available else 'not free to deploy'})"


NODE_EVENTS_PER_PAGE = 25


def node_events_page(node: Node, *, older: str | None = None, newer: str | None = None) -> KeysetPage:
    """A page of the node's history, newest first (index ``nodeevent_node_latest``)."""
    return keyset_page(node.events.select_related("actor", "order"), field="at",
                       size=NODE_EVENTS_PER_PAGE, older=older, newer=newer)


def node_last_health(node: Node) -> HealthCheck | None:
    return node.health_checks.order_by("-at", "-pk").first()


def eligible_nodes_for(order) -> QuerySet[Node]:
    """Ready nodes staff may pick by hand for ``order``."""
    return Node.objects.ready().filter(sku=order.sku).order_by("fabric_group", "hostname")


def inventory_summary() -> list[dict]:
    """Per SKU: how many nodes are in stock, serving orders, in maintenance or failed."""
    rows = Node.objects.values("sku_id", "sku__name", "sku__slug", "state").annotate(n=Count("pk"))
    by_sku: dict[int, dict] = {}
    for row in rows:
        entry = by_sku.setdefault(row["sku_id"], {"name": row["sku__name"], "slug": row["sku__slug"],
                                                  "ready": 0, "busy": 0, "maintenance": 0, "failed": 0,
                                                  "enrolled": 0, "total": 0})
        state = row["state"]
        if state == NodeState.RETIRED:
            continue  # out of the fleet
        bucket = ("ready" if state == NodeState.READY else "maintenance" if state == NodeState.MAINTENANCE
                  else "failed" if state in NODE_FAILED else "enrolled" if state == NodeState.ENROLLED
                  else "busy")
        entry[bucket] += row["n"]
        entry["total"] += row["n"]
    return sorted(by_sku.values(), key=lambda e: e["name"])
