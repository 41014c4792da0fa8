"""A node's clean baseline and what it holds now (``stack/sh/inventory.sh`` through its driver):
recorded when the node enters stock (the acceptance check) and, for a node that has none yet, by
the deploy step before a tenant touches it; the hand-back's attestation compares with it.
Neither the baseline nor the inventory is written to a customer's step log (accounts and
sockets of the node are the operator's business)."""

from __future__ import annotations

from django.db import transaction
from django.utils import timezone

from provisioning.drivers import DriverError, is_test_host, login_user_for
from provisioning.inventory.handback import parse_inventory
from provisioning.models import Node, NodeEvent
from provisioning.stack.scripts import inventory_script


def node_inventory(*, node: Node, driver) -> tuple[str, ...]:
    """The inventory entries of ``node`` now. A simulated node has no disk: none."""
    if driver.simulated:
        return ()
    lines: list[str] = []
    env = {"TRAINYARD_LOGIN_USER": login_user_for(node),
           "TRAINYARD_TEST_HOST": "1" if is_test_host(node) else "0"}
    result = driver.run(inventory_script(), name="inventory", on_line=lines.append, env=env)
    if not result.ok:
        last = result.output_tail[-1] if result.output_tail else "no output"
        raise DriverError(f"listing what {node.hostname} holds failed (exit {result.exit_status}): "
                          f"{last}", permanent=False)
    return parse_inventory(lines)


def baseline_record(*, node: Node, driver, note: str = "") -> tuple[str, ...]:
    """Stores what ``node`` holds now as its clean baseline; ``note``: with an event on its
    history saying so (the acceptance check says it in its own transition's note instead)."""
    entries = node_inventory(node=node, driver=driver)
    with transaction.atomic():
        locked = Node.objects.select_for_update().get(pk=node.pk)
        Node.objects.filter(pk=node.pk).update(baseline=list(entries), baseline_at=timezone.now())
        if note:
            NodeEvent.objects.create(node=locked, transition="baseline", from_state=locked.state,
                                     to_state=locked.state, note=f"{note} ({len(entries)} entries)")
    node.baseline, node.baseline_at = list(entries), timezone.now()
    return entries
