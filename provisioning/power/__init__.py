"""Power control through a node's BMC, apart from any OS on it: Redfish (``redfish``) here; IPMI
through ``ipmitool`` stays in the ssh driver. Drivers call these; the operator's node actions
reach them through the node's driver."""

from __future__ import annotations

from collections.abc import Mapping


def bmc_kind(options: Mapping) -> str:
    """Which BMC a node's (merged) driver options name: ``redfish``, ``ipmi`` or ``""``. Settings
    give only passwords, so a BMC counts once the node names its address."""
    for kind in ("redfish", "ipmi"):
        bmc = options.get(kind)
        if isinstance(bmc, Mapping) and bmc.get("address"):
            return kind
    return ""


def bmc_label(options: Mapping) -> str:
    """``"Redfish admin@https://10.0.0.5 (system 1)"``, ``"IPMI admin@10.0.0.5"`` or ``""``."""
    kind = bmc_kind(options)
    if not kind:
        return ""
    bmc = options[kind]
    if kind == "ipmi":
        return f"IPMI {bmc.get('user')}@{bmc['address']}"
    system = f" (system {bmc['system_id']})" if bmc.get("system_id") else ""
    return f"Redfish {bmc.get('user')}@{bmc['address']}{system}"
