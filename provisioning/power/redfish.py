"""Power and one-time boot override through a Redfish BMC (sushy).

Built from a node's options ``redfish``: ``{"address", "user", "system_id", "verify_tls"}`` (the
node's driver_options) overlaid on ``{"password"}`` (settings, from ``REDFISH_PASSWORD_FILE``; a
node's driver_options may not hold it). ``address`` is a URL (``https://10.0.0.5``) or
``host[:port]`` (https assumed). ``system_id`` names the ComputerSystem (``1``, a UUID, or the
path ``/redfish/v1/Systems/1``); empty, the BMC's only system is used.

A BMC acknowledges a reset long before the machine is in the asked state, so every action polls
the power state until it matches, with a deadline (``settle_timeout_s``), never a fixed sleep.

Errors (``DriverError``): wrong credentials and an unknown system id are permanent and say what to
check; a BMC that cannot be reached, answers 5xx or does not settle in time is transient; a reset
the BMC refuses (4xx) is permanent. The password never goes into a message, a log line or repr().
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

import sushy
from sushy import exceptions as sushy_errors

from provisioning.drivers.base import DriverError, ExecutionStopped, Fence

logger = logging.getLogger(__name__)

BOOT_DEVICES = {"pxe": sushy.BootSource.PXE, "disk": sushy.BootSource.HDD}
_SYSTEMS_PREFIX = "/redfish/v1/Systems/"
# Preferred reset types per action, first the one a BMC is asked for when it allows it.
_RESETS = {
    "on": (sushy.ResetType.ON, sushy.ResetType.FORCE_ON),
    "off": (sushy.ResetType.FORCE_OFF, sushy.ResetType.GRACEFUL_SHUTDOWN),
    "cycle": (sushy.ResetType.FORCE_RESTART, sushy.ResetType.POWER_CYCLE),
}


@dataclass(frozen=True)
class RedfishBmc:
    """Where a node's BMC is and how to log in; ``password`` stays out of repr()."""

    address: str
    user: str
    password: str = field(repr=False)
    system_id: str = ""
    verify_tls: bool | str = True  # False, or a CA bundle path
    timeout_s: float = 30.0  # one HTTP request
    settle_timeout_s: float = 180.0  # until the power state matches after an action

    @classmethod
    def from_options(cls, options: Mapping) -> RedfishBmc:
        address = str(options.get("address") or "").strip()
        user = str(options.get("user") or "").strip()
        if not address or not user:
            raise DriverError("the Redfish BMC needs an address and a user "
                              "(driver_options.redfish)", permanent=True)
        password = options.get("password")
        if not password:
            raise DriverError("no Redfish BMC password: set REDFISH_PASSWORD_FILE on the workers",
                              permanent=True)
        verify = options.get("verify_tls", True)
        return cls(address=address, user=user, password=str(password),
                   system_id=str(options.get("system_id") or "").strip(),
                   verify_tls=verify if isinstance(verify, (bool, str)) else True,
                   timeout_s=float(options.get("timeout_s", 30)),
                   settle_timeout_s=float(options.get("settle_timeout_s", 180)))

    @property
    def base_url(self) -> str:
        return self.address.rstrip("/") if "://" in self.address else f"https://{self.address}"

    @property
    def system_path(self) -> str:
        if self.system_id.startswith("/"):
            return self.system_id
        return _SYSTEMS_PREFIX + self.system_id


class RedfishPower:
    """One node's BMC. ``where`` names the node in messages; ``fence`` (the pipeline's claim)
    is checked before each action: a lost claim stops it."""

    def __init__(self, bmc: RedfishBmc, *, where: str, fence: Fence | None = None,
                 sleep: Callable[[float], None] = time.sleep) -> None:
        self.bmc = bmc
        self.where = where
        self.fence = fence
        self._sleep = sleep

    def __repr__(self) -> str:
        return f"<RedfishPower {self.bmc.user}@{self.bmc.base_url} {self.bmc.system_id!r}>"

    def status(self) -> str:
        """``on``, ``off``, ``powering on``, ``powering off``, ``paused`` or ``unknown``."""
        with self._errors("power status"):
            return _state_name(self._system().power_state)

    def power(self, action: str) -> str:
        """on, off or cycle (``reboot`` is cycle); returns the power state once it matches.
        ``status`` only reads it."""
        if action == "reboot":
            action = "cycle"
        if action == "status":
            return self.status()
        if action not in _RESETS:
            raise DriverError(f"unknown power action {action!r}; use on, off, cycle or status",
                              permanent=True)
        self._check_fence(action)
        with self._errors(f"power {action}"):
            system = self._system()
            before = system.power_state
            wanted = sushy.PowerState.OFF if action == "off" else sushy.PowerState.ON
            if action != "cycle" and before == wanted:
                return _state_name(before)
            # A machine that is off is cycled by switching it on.
            reset = _pick_reset(system, "on" if action == "cycle" and before == sushy.PowerState.OFF
                                else action)
            logger.info("redfish %s on %s: %s", action, self.where, reset.value)
            system.reset_system(reset)
            return self._wait_for(system, wanted, action)

    def boot_once(self, device: str) -> None:
        """The next boot only from ``pxe`` or ``disk`` (BootSourceOverrideEnabled=Once)."""
        if device not in BOOT_DEVICES:
            raise DriverError(f"unknown boot device {device!r}; use pxe or disk", permanent=True)
        self._check_fence(f"boot override {device}")
        with self._errors(f"boot override {device}"):
            system = self._system()
            system.set_system_boot_source(BOOT_DEVICES[device],
                                          enabled=sushy.BootSourceOverrideEnabled.ONCE)

    def boot_target(self) -> str:
        """The boot override the BMC reports now (``Pxe``, ``Hdd``, ``None``…)."""
        with self._errors("boot override"):
            target = self._system().boot.target
            return target.value if target is not None else "None"

    # --- plumbing ----------------------------------------------------------------------------
    def _check_fence(self, what: str) -> None:
        if self.fence is not None and self.fence.cancelled:
            raise ExecutionStopped(f"{self.where}: {what} not sent: the claim was lost")

    def _root(self) -> sushy.Sushy:
        return sushy.Sushy(self.bmc.base_url, verify=self.bmc.verify_tls,
                           auth=sushy.auth.BasicAuth(username=self.bmc.user,
                                                     password=self.bmc.password),
                           # One retry of a refused connection, a second apart: the pipeline's
                           # own backoff retries the step, not sushy's 10 × 3 s.
                           server_side_retries=2, server_side_retries_delay=1,
                           read_timeout=self.bmc.timeout_s, connect_timeout=min(self.bmc.timeout_s, 10))

    def _system(self):
        root = self._root()
        if self.bmc.system_id:
            try:
                return root.get_system(self.bmc.system_path)
            except sushy_errors.ResourceNotFoundError:
                raise DriverError(
                    f"{self.where}: the BMC at {self.bmc.base_url} has no system "
                    f"{self.bmc.system_id!r}; it has {_members(root)}: fix "
                    f"driver_options.redfish.system_id", permanent=True) from None
        members = list(root.get_system_collection().members_identities)
        if len(members) != 1:
            raise DriverError(f"{self.where}: the BMC at {self.bmc.base_url} has "
                              f"{len(members)} systems ({_members(root)}): set "
                              f"driver_options.redfish.system_id", permanent=True)
        return root.get_system(members[0])

    def _wait_for(self, system, wanted, action: str) -> str:
        deadline = time.monotonic() + self.bmc.settle_timeout_s
        interval = 0.25
        while True:
            system.refresh(force=True)
            state = system.power_state
            if state == wanted:
                return _state_name(state)
            if time.monotonic() >= deadline:
                raise DriverError(
                    f"{self.where}: power {action} was accepted by the BMC but the system is still "
                    f"{_state_name(state)} after {self.bmc.settle_timeout_s:g}s", permanent=False)
            self._check_fence(f"power {action}")
            self._sleep(min(interval, max(0.0, deadline - time.monotonic())))
            interval = min(interval * 2, 2.0)

    def _errors(self, what: str):
        return _ErrorMap(self, what)


class _ErrorMap:
    """sushy's exceptions → DriverError with the node, the action and what to check."""

    def __init__(self, power: RedfishPower, what: str):
        self.power, self.what = power, what

    def __enter__(self):
        return self

    def __exit__(self, kind, exc, tb):
        if exc is None or isinstance(exc, DriverError):
            return False
        where = f"{self.power.where}: Redfish {self.what} at {self.power.bmc.base_url}"
        if isinstance(exc, sushy_errors.AccessError):
            raise DriverError(f"{where}: the BMC refused user {self.power.bmc.user!r} "
                              f"(HTTP {exc.status_code}); check the user and the password in "
                              "REDFISH_PASSWORD_FILE", permanent=True) from None
        if isinstance(exc, sushy_errors.ResourceNotFoundError):
            raise DriverError(f"{where}: not found: {exc.message}", permanent=True) from None
        if isinstance(exc, sushy_errors.ServerSideError):
            raise DriverError(f"{where}: the BMC answered HTTP {exc.status_code}: "
                              f"{_brief(exc)}", permanent=False) from None
        if isinstance(exc, sushy_errors.HTTPError):
            raise DriverError(f"{where}: the BMC refused it (HTTP {exc.status_code}): "
                              f"{_brief(exc)}", permanent=True) from None
        if isinstance(exc, sushy_errors.ConnectionError):
            raise DriverError(f"{where}: cannot reach the BMC: {_reason(exc)}",
                              permanent=False) from None
        if isinstance(exc, (sushy_errors.SushyError, ValueError, KeyError)):
            raise DriverError(f"{where}: unexpected answer from the BMC: {exc}",
                              permanent=True) from None
        return False


def _pick_reset(system, action: str):
    preferred = _RESETS[action]
    try:
        allowed = system.get_allowed_reset_system_values()
    except sushy_errors.SushyError:
        allowed = set()
    for reset in preferred:
        if not allowed or reset in allowed:
            return reset
    raise DriverError(f"the BMC allows none of {', '.join(r.value for r in preferred)} "
                      f"(it allows {', '.join(sorted(r.value for r in allowed))})", permanent=True)


def _members(root) -> str:
    try:
        ids = [m.rstrip("/").rsplit("/", 1)[-1]
               for m in root.get_system_collection().members_identities]
    except sushy_errors.SushyError:
        return "systems it did not list"
    return ", ".join(repr(i) for i in sorted(ids)) or "no systems"


def _state_name(state) -> str:
    return state.value.lower() if state is not None else "unknown"


def _brief(exc) -> str:
    return (getattr(exc, "detail", None) or getattr(exc, "message", None) or str(exc))[:300]


def _reason(exc) -> str:
    text = str(exc)
    for marker in ("Connection refused", "timed out", "Name or service not known",
                   "No route to host", "certificate verify failed"):
        if marker in text:
            return marker
    return text[-200:]
