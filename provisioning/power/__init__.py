"""Power control through a node's BMC, apart from any OS on it: Redfish (``redfish``) here; IPMI
through ``ipmitool`` (``ipmi``). How a node stores its BMC is ``bmc``'s. Drivers call these; the
operator's node actions reach them through the node's driver."""

from __future__ import annotations

from collections.abc import Mapping

from provisioning.power.bmc import parse_bmc


def bmc_kind(options: Mapping) -> str:
    """Which BMC a node's (merged) driver options name: ``redfish``, ``ipmi`` or ``""``."""
    bmc = parse_bmc(options)
    return bmc.kind if bmc is not None and bmc.named else ""


def bmc_label(options: Mapping) -> str:
    """``"Redfish admin@https://10.0.0.5 (system 1)"``, ``"IPMI admin@10.0.0.5"`` or ``""``."""
    bmc = parse_bmc(options)
    return bmc.label if bmc is not None and bmc.named else ""
