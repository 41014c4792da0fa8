"""Nodes for tests: simulated driver, zero delay, a journal in a per-test directory."""

import itertools

from portal.catalog.models import ServerSKU
from provisioning.models import Node, NodeEvent
from provisioning.states import NodeState

_numbers = itertools.count(1)


def make_node(*, sku: str | ServerSKU, state_dir, state: str = NodeState.READY,
              fabric_group: str = "", hostname: str | None = None, **options) -> Node:
    """A simulated node (``options`` go to the driver: fail, exit_status, delays, …)."""
    sku_row = sku if isinstance(sku, ServerSKU) else ServerSKU.objects.get(slug=sku)
    number = next(_numbers)
    node = Node.objects.create(
        hostname=hostname or f"gpu-{number:04d}", sku=sku_row,
        management_address=f"10.0.{number // 250}.{number % 250 + 1}", driver="simulated",
        driver_options={"delay_scale": 0, "state_dir": str(state_dir), **options},
        fabric_group=fabric_group, nvme_devices=["/dev/nvme0n1", "/dev/nvme1n1"], state=state,
    )
    NodeEvent.objects.create(node=node, transition="enrol", from_state=NodeState.ENROLLED,
                             to_state=state, note="test fixture")
    return node
