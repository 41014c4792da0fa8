"""Operators power a node through its BMC from the node page (a hung machine, a BIOS change):
the request (``services.node_power_request``) is audited on the node and queued; a worker asks
the node's driver here, which waits until the BMC reports the asked state, and records the
outcome in the node's history."""

from __future__ import annotations

from portal.core.states import actor_or_none
from provisioning.drivers import DriverError, driver_for, driver_options, is_test_host
from provisioning.models import Node, NodeEvent
from provisioning.power import bmc_kind, bmc_label

# action → what the history and the buttons call it
NODE_POWER_ACTIONS = {"on": "Power on", "off": "Power off", "cycle": "Power cycle"}


def node_power_refusal(node: Node) -> str | None:
    """Why ``node`` cannot be powered from the page, in words; None when it can."""
    if is_test_host(node):
        return f"{node.hostname} is a declared test host: power is never switched on it."
    if not bmc_kind(driver_options(node)):
        return (f"{node.hostname} has no BMC (Redfish or IPMI) in its driver options; edit the "
                f"node to add one.")
    return None


def node_power_apply(*, node: Node, by, action: str) -> bool:
    """Worker: switches the power through the node's driver and records the outcome (the
    driver's own words when the BMC refused or did not settle). True when it was done."""
    label = NODE_POWER_ACTIONS[action]
    try:
        driver_for(node).power("reboot" if action == "cycle" else action)
    except DriverError as exc:
        kind = "permanent" if exc.permanent else "may pass: try again"
        NodeEvent.objects.create(node=node, actor=actor_or_none(by),
                                 transition=f"power_{action}_failed", from_state=node.state,
                                 to_state=node.state, note=f"{exc.message} ({kind})"[:2000])
        return False
    NodeEvent.objects.create(node=node, actor=actor_or_none(by), transition=f"power_{action}",
                             from_state=node.state, to_state=node.state,
                             note=f"{label}: done through {bmc_label(driver_options(node))}")
    return True
