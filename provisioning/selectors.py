"""Reads for pages and the API: progress of an order, access details and the acceptance report
(typed step results), runs needing staff, stock and health."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from datetime import datetime

from django.db.models import Count, Exists, OuterRef, Prefetch, Q, QuerySet

from portal.catalog.models import ServerSKU
from portal.core.keyset import KeysetPage, keyset_page
from portal.orders.models import Order
from portal.orders.states import OrderState
from provisioning.drivers import (
    DriverError,
    OptionsSchema,
    driver_for,
    driver_options,
    is_test_host,
    login_user_for,
    options_schema,
)
from provisioning.drivers.ssh import host_key_fingerprints
from provisioning.models import HealthCheck, Node, NodeEvent, ProvisioningRun, StepLogLine, StepRun
from provisioning.monitoring.alerts import open_alerts
from provisioning.pipeline.steps.acceptance import AcceptanceReport, AcceptanceResult
from provisioning.pipeline.steps.handover import HandoverResult
from provisioning.power import bmc_label
from provisioning.states import (
    NODE_FAILED,
    RUN_DONE,
    STEPS,
    NodeState,
    RunKind,
    RunStatus,
    StepStatus,
    step_spec,
)
from provisioning.storage.services import StorageResult


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


def node_facts(node: Node) -> NodeFacts:
    options = driver_options(node)
    bmc = bmc_label(options)
    return NodeFacts(schema=options_schema(node.driver), login_user=login_user_for(node),
                     test_host=is_test_host(node),
                     host_key_fingerprints=host_key_fingerprints(options.get("host_key")),
                     bmc=bmc, baseline_entries=len(node.baseline or ()))


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


def node_history(node: Node) -> QuerySet[NodeEvent]:
    return node.events.select_related("actor", "order").order_by("at", "pk")


NODE_EVENTS_PER_PAGE = 25


def node_events_page(node: Node, *, older: str | None = None, newer: str | None = None) -> KeysetPage:
    """A page of the node's history, newest first (index ``nodeevent_node_latest``)."""
    return keyset_page(node.events.select_related("actor", "order"), field="at",
                       size=NODE_EVENTS_PER_PAGE, older=older, newer=newer)


def node_last_health(node: Node) -> HealthCheck | None:
    return node.health_checks.order_by("-at", "-pk").first()


def eligible_nodes_for(order) -> QuerySet[Node]:
    """Ready nodes staff may pick by hand for ``order``."""
    return Node.objects.filter(sku=order.sku, state=NodeState.READY).order_by("fabric_group",
                                                                              "hostname")


@dataclass(frozen=True)
class StepView:
    id: int
    name: str
    label: str
    status: str
    status_label: str
    attempts: int
    started_at: datetime | None
    finished_at: datetime | None
    error: str
    log_lines: tuple[str, ...]
    result: dict
    executions: int = 0  # every execution ever started (a staff retry resets ``attempts``)


@dataclass(frozen=True)
class NodeProgress:
    node_id: int
    hostname: str
    state: str
    state_label: str
    steps: tuple[StepView, ...]


@dataclass(frozen=True)
class OrderProgress:
    run_id: int | None
    kind: str
    run_status: str
    percent: int
    current: str  # "Deploy OS on gpu-a01", "" when idle
    error: str
    nodes: tuple[NodeProgress, ...] = field(default_factory=tuple)

    @property
    def done(self) -> bool:
        return self.run_status in RUN_DONE


def order_runs(order) -> QuerySet[ProvisioningRun]:
    return order.runs.order_by("-created_at", "-pk")


def order_progress(order, *, run: ProvisioningRun | None = None, log_lines: int = 30,
                   staff: bool = False) -> OrderProgress:
    """The latest run of ``order`` (or ``run``): per node, each step with status and log tail.
    The log holds the customer's lines unless ``staff`` (the run page) asks for the full text."""
    lines_shown = StepLogLine.objects.order_by("pk")
    if not staff:
        lines_shown = lines_shown.filter(staff_only=False)
    run = run or order_runs(order).first()
    if run is None:
        return OrderProgress(run_id=None, kind="", run_status="", percent=0, current="", error="")
    swapped_out = run.steps.filter(status=StepStatus.SKIPPED).values("node_id")
    steps = list(run.steps.exclude(node_id__in=swapped_out).select_related("node")
                 .prefetch_related(Prefetch("log_lines", queryset=lines_shown))
                 .order_by("node__hostname", "position"))
    by_node: dict[int, list[StepRun]] = {}
    for sr in steps:
        by_node.setdefault(sr.node_id, []).append(sr)
    nodes, current = [], ""
    for srs in by_node.values():
        node = srs[0].node
        views = []
        for sr in srs:
            spec = step_spec(run.kind, sr.step)
            lines = [line.text for line in sr.log_lines.all()][-log_lines:]
            views.append(StepView(id=sr.pk, name=sr.step, label=spec.label, status=sr.status,
                                  status_label=StepStatus(sr.status).label, attempts=sr.attempts,
                                  started_at=sr.started_at, finished_at=sr.finished_at,
                                  error=sr.error, log_lines=tuple(lines), result=sr.result,
                                  executions=sr.executions))
            if sr.status in (StepStatus.RUNNING, StepStatus.RETRYING) and not current:
                current = f"{spec.label} on {node.hostname}"
        label = NodeState(node.state).label
        if not staff and node.state in NODE_FAILED:  # "Failed: deploy" names our internals
            label = "Needs our attention"
        nodes.append(NodeProgress(node_id=node.pk, hostname=node.hostname, state=node.state,
                                  state_label=label, steps=tuple(views)))
    total = len(steps) or len(STEPS[run.kind])
    succeeded = sum(1 for sr in steps if sr.status == StepStatus.SUCCEEDED)
    return OrderProgress(run_id=run.pk, kind=run.kind, run_status=run.status,
                         percent=round(100 * succeeded / total), current=current, error=run.error,
                         nodes=tuple(nodes))


def acceptance_report(order) -> AcceptanceReport | None:
    """The report of the latest acceptance test on ``order`` that reported (passed, or failed
    with its checks), so the page says why a server was not handed over. On a cluster each
    node's step reports: the one that explains a failure, else the training job's (rank 0),
    with every other node's own checks (nccl-tests, DCGM, memory …) added to its table."""
    done = (StepStatus.SUCCEEDED, StepStatus.FAILED)
    latest = (StepRun.objects.filter(run__order=order, step="acceptance", status__in=done)
              .exclude(result={}).order_by("-finished_at").first())
    if latest is None or not (latest.result or {}).get("report"):
        return None
    reports = [AcceptanceResult.from_dict(sr.result).report for sr in StepRun.objects.filter(
        run_id=latest.run_id, step="acceptance", status__in=done).order_by("-finished_at")]
    # A node whose checks failed explains the run's failure; else the training job's report.
    failed = next((r for r in reports if r.checks and not r.passed), None)
    main = failed or next((r for r in reports if r.trained), AcceptanceResult.from_dict(latest.result).report)
    return _with_node_checks(main, [r for r in reports if r is not main])


def _with_node_checks(main: AcceptanceReport, others: list[AcceptanceReport]) -> AcceptanceReport:
    seen = {(c.node, c.name) for c in main.checks}
    extra = sorted((c for r in others for c in r.checks if c.node and (c.node, c.name) not in seen),
                   key=lambda c: c.node)  # stable: each node's checks keep their order
    return replace(main, checks=main.checks + tuple(extra)) if extra else main


@dataclass(frozen=True)
class NodeAccess:
    hostname: str
    rank: int  # the node's rank in a cluster (hostname order, as the pipeline numbers them)
    handover: HandoverResult

    @property
    def simulated(self) -> bool:
        return self.handover.simulated

    @property
    def ssh_command(self) -> str:
        return self.handover.ssh_command

    @property
    def host_key_fingerprints(self) -> tuple[str, ...]:
        return tuple(self.handover.host_key_fingerprints or ())


@dataclass(frozen=True)
class OrderAccess:
    nodes: tuple[NodeAccess, ...] = ()
    storage: StorageResult | None = None  # the bucket, as the latest storage step recorded it


STORAGE_STEPS = ("storage", "rotate_storage_key")


def order_access(order) -> OrderAccess:
    """How the customer reaches the servers and the bucket of ``order``: what the handover step
    of its provisioning run and the latest storage step (set-up or key rotation) recorded."""
    handover_steps = (StepRun.objects.filter(run__order=order, run__kind=RunKind.PROVISION,
                                             status=StepStatus.SUCCEEDED, step="handover",
                                             node__order=order)
                      .select_related("node").order_by("node__hostname", "-finished_at"))
    handovers: dict[int, tuple[str, HandoverResult]] = {}
    for sr in handover_steps:
        handovers.setdefault(sr.node_id, (sr.node.hostname, HandoverResult.from_dict(sr.result)))
    nodes = tuple(NodeAccess(hostname=hostname, rank=rank, handover=result)
                  for rank, (hostname, result) in enumerate(handovers.values()))
    return OrderAccess(nodes=nodes, storage=_latest_storage(order))


def _latest_storage(order) -> StorageResult | None:
    latest = (StepRun.objects.filter(run__order=order, status=StepStatus.SUCCEEDED,
                                     step__in=STORAGE_STEPS)
              .order_by("-finished_at", "-pk").values_list("result", flat=True))
    for data in latest[:5]:
        try:
            result = StorageResult.from_dict(data)
        except ValueError:
            continue
        if result.ordered:
            return result
    return None


def runs_needing_attention() -> QuerySet[ProvisioningRun]:
    """Failed runs that wait for staff (retry or swap): provisioning whose order failed, and
    hand-backs (terminations) that stopped, the customer's access already ended."""
    waiting = (Q(kind=RunKind.PROVISION, order__state=OrderState.PROVISION_FAILED)
               | Q(kind=RunKind.TERMINATE, order__state__in=(OrderState.TERMINATING,
                                                             OrderState.CANCELLED)))
    return (ProvisioningRun.objects.filter(waiting, status=RunStatus.FAILED)
            .select_related("order__organisation", "order__sku__gpu").order_by("finished_at"))


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


def order_last_health(order) -> list[HealthCheck]:
    """The latest health check of each node of ``order``."""
    checks = []
    for node in Node.objects.filter(order=order).order_by("hostname"):
        last = node_last_health(node)
        if last is not None:
            checks.append(last)
    return checks


def staff_counts(user) -> dict[str, int]:
    """What the staff navigation badges count: orders waiting for approval (approvers), failed
    runs and failed nodes (operators)."""
    counts = {"approvals": 0, "failures": 0}
    if user.is_approver:
        counts["approvals"] = Order.objects.filter(state=OrderState.PENDING_APPROVAL).count()
    if user.is_operator:
        counts["failures"] = (runs_needing_attention().count()
                              + Node.objects.filter(state__in=NODE_FAILED).count())
    return counts


def staff_dashboard(user, *, rows: int) -> dict:
    """The staff start page: the approval queue, what failed, and stock per SKU."""
    pending = (Order.objects.filter(state=OrderState.PENDING_APPROVAL)
               .select_related("organisation", "sku").order_by("state_changed_at", "pk"))
    return {
        "counts": staff_counts(user),
        "pending": list(pending[:rows]) if user.is_approver else [],
        "failed_runs": list(runs_needing_attention()[:rows]),
        "failed_nodes": list(Node.objects.filter(state__in=NODE_FAILED).select_related("sku")
                             .order_by("hostname")[:rows]) if user.is_operator else [],
        "stock": inventory_summary(),
        "alerts": list(open_alerts()[:rows]) if user.is_operator else [],
        "alert_count": open_alerts().count() if user.is_operator else 0,
    }
