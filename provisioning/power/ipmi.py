"""Power through an IPMI BMC with the worker's ``ipmitool`` (moved out of the ssh driver as is).

``ipmi`` is a node's ``{"address", "user", "interface": "lanplus"}`` overlaid on the settings'
``{"password"}`` (``IPMI_PASSWORD_FILE``); the password reaches ipmitool through
``IPMI_PASSWORD`` (``-E``), never argv. ``ipmitool chassis power`` returns once the BMC has
acknowledged; a failure may pass (transient), a missing tool or address is permanent."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Mapping

from provisioning.drivers.base import DriverError


def ipmi_power(ipmi: Mapping, action: str, *, where: str) -> None:
    """``on``, ``off`` or ``reboot`` (a chassis power cycle)."""
    binary = shutil.which("ipmitool")
    if binary is None:
        raise DriverError("ipmitool is not installed on the worker (apt-get install ipmitool)",
                          permanent=True)
    address = ipmi.get("address")
    if not address:
        raise DriverError(f"{where}: driver_options.ipmi has no address", permanent=True)
    verb = {"on": "on", "off": "off", "reboot": "cycle"}[action]
    argv = [binary, "-I", str(ipmi.get("interface", "lanplus")), "-H", str(address),
            "-U", str(ipmi.get("user", "ADMIN")), "-E", "chassis", "power", verb]
    env = {**os.environ, "IPMI_PASSWORD": str(ipmi.get("password", ""))}
    try:
        done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=60)
    except subprocess.TimeoutExpired:
        raise DriverError(f"{where}: BMC {address} did not answer within 60s",
                          permanent=False) from None
    if done.returncode != 0:
        raise DriverError(f"{where}: ipmitool chassis power {verb} failed: "
                          f"{(done.stderr or done.stdout).strip()[-300:]}", permanent=False)
