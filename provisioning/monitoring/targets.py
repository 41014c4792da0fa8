"""The scrape targets Prometheus reads through HTTP service discovery (``http_sd_configs``): one
group per monitored node, labelled with what a query may select on (node, SKU, order).

A customer's chart query selects on ``order`` only (``provisioning.monitoring.queries``): the
label is written here, by the portal, from the node's order at scrape time, never by the node.
"""

from __future__ import annotations

from django.conf import settings

from provisioning.drivers import DriverError, driver_class, is_test_host, split_address
from provisioning.models import Node
from provisioning.states import NodeState

# Nodes in service or in stock. A node being installed or wiped is rebooted and re-imaged on
# purpose: its exporters are down by design, so it is left out (no "exporter down" alert).
MONITORED_STATES = (NodeState.ACTIVE, NodeState.READY)
EXPORTERS = {"dcgm": "MONITORING_DCGM_EXPORTER_PORT", "node": "MONITORING_NODE_EXPORTER_PORT"}


def has_exporters(node: Node) -> bool:
    """Whether the node runs dcgm-exporter and node_exporter: a simulated node has no machine
    behind it, and a declared test host has no GPUs (both are declared as having none)."""
    return not driver_class(node.driver).simulated and not is_test_host(node)


def scrape_targets(exporter: str) -> list[dict]:
    """``[{"targets": ["host:port"], "labels": {...}}]`` for ``exporter`` (a key of EXPORTERS),
    as Prometheus's HTTP service discovery reads it."""
    port = getattr(settings, EXPORTERS[exporter])
    nodes = (Node.objects.filter(state__in=MONITORED_STATES).select_related("sku", "order")
             .order_by("hostname"))
    groups = []
    for node in nodes:
        if node.driver not in settings.NODE_DRIVERS or not has_exporters(node):
            continue
        try:
            host, _ = split_address(node.management_address, port)
        except (DriverError, ValueError):
            continue  # no usable address: the inventory shows the node's problem
        labels = {"node": node.hostname, "sku": node.sku.slug, "node_state": node.state}
        if node.order_id and node.state == NodeState.ACTIVE:
            labels["order"] = node.order.reference
        groups.append({"targets": [f"{_bracketed(host)}:{port}"], "labels": labels})
    return groups


def _bracketed(host: str) -> str:
    return f"[{host}]" if ":" in host else host
