"""A node that Canonical MAAS installs, erases and powers (``provisioning.drivers.maas_api``);
once deployed, Trainyard works on it over SSH like any other node (an ``SshDriver`` does
``run`` and ``health``).

Built for one node: ``MaasDriver(target)``. ``target.options`` (``settings.NODE_DRIVER_OPTIONS
["maas"]`` overlaid by the node's ``driver_options``):

- ``url`` and ``api_key`` (settings: ``MAAS_URL``, ``MAAS_API_KEY_FILE``; a node may not hold the
  key), ``verify_tls``, ``timeout_s`` (one request, 30).
- ``system_id`` (the node's): the MAAS machine this node is; without it, the one MAAS machine with
  the node's hostname. ``tags``: tags MAAS must also find on it when allocating (a check that
  the machine is what the SKU says).
- ``distro_series``: what MAAS installs (``ubuntu/noble``); empty: from the ordered image
  (``ubuntu-24.04-cuda-12.8`` → ``ubuntu/24.04``; a variant is not installed by MAAS: the
  acceptance test judges the GPUs).
- ``deploy_timeout_s`` (3600), ``release_timeout_s`` (10800: a full disk erase is slow),
  ``power_timeout_s`` (300), ``poll_interval_s`` (10): polls with a deadline, never a fixed wait.
- ``wipe_method`` (the node's, given by ``driver_for``): how ``release(erase=True)`` asks MAAS to
  erase: ``secure_erase`` → the drive's secure erase (MAAS falls back to zeros), ``zero`` → zeros,
  ``discard`` → secure erase or else MAAS's quick erase, ``files`` → quick erase (no local data
  devices); the hand-back's attestation checks the outcome either way.
- The SSH options of the ssh driver (``user``, ``private_key_file``, ``host_key`` …) for the
  delegate. MAAS's install makes the host key: Trainyard generates it, hands it to cloud-init in
  the user data (``ssh_keys``) and pins its public half from ``DeployFacts`` — never trust on
  first use. The management user and its key come from ``provisioning.stack.cloud_init``.

Fencing: ``op-set_owner_data`` records the claim's token (and the host key this deploy made) on
the allocated machine. An operation whose token is older than the recorded one stops
(``ExecutionStopped``), before it acts and at every poll; a newer execution that finds a deploy of
an older one under way adopts it (records its own token, keeps polling) instead of starting a
second one, so two deploys of one machine never overlap. MAAS clears owner data on release.

Errors: MAAS's 401/403/404 and a failed deployment or erase are permanent, with MAAS's words (the
last event for a failure); 409, 5xx, timeouts and a deploy that outlives its deadline are transient.
"""

from __future__ import annotations

import base64
import logging
import re
import time
from collections.abc import Callable, Mapping
from dataclasses import replace

from provisioning.drivers.base import (
    POWER_ACTIONS,
    DeployFacts,
    DriverError,
    EngineCheck,
    ExecutionStopped,
    HealthReport,
    LineCallback,
    NodeTarget,
    OptionsSchema,
    RunResult,
)
from provisioning.drivers.maas_api import MaasApi, MaasApiKey
from provisioning.drivers.ssh import SshDriver
from provisioning.stack.cloud_init import new_host_key, render_user_data

logger = logging.getLogger(__name__)

FENCE_KEY = "trainyard_fence"
HOST_KEY_KEY = "trainyard_host_key"
DEPLOYED, DEPLOYING, READY = "Deployed", "Deploying", "Ready"
FAILED_DEPLOY = ("Failed deployment",)
FAILED_RELEASE = ("Failed disk erasing", "Releasing failed")
RELEASING = ("Releasing", "Disk erasing")
# What MAAS releases (its RELEASABLE_STATUSES, less those Trainyard never leaves a machine in).
RELEASABLE = ("Allocated", DEPLOYED, DEPLOYING, "Failed deployment", "Failed disk erasing",
              "Releasing failed", "Broken")
ERASE_FLAGS = {  # node wipe method → MAAS release form
    "secure_erase": {"secure_erase": True},
    "zero": {},
    "discard": {"secure_erase": True, "quick_erase": True},
    "files": {"quick_erase": True},
}
_IMAGE = re.compile(r"^(?P<os>[a-z]+)[-_/]?(?P<version>\d+(?:\.\d+)*)")


class MaasDriver:
    name = "maas"
    simulated = False
    options_schema = OptionsSchema(login_user=True, engine=True, engine_machine=("system_id",))

    def __init__(self, target: NodeTarget, *, sleep: Callable[[float], None] = time.sleep) -> None:
        self.target = target
        options = dict(target.options)
        self.options = options
        self.system_id = (self.options_schema.parse(options).engine_machine or "").strip()
        tags = options.get("tags") or ()
        self.tags = (tags,) if isinstance(tags, str) else tuple(str(t) for t in tags)
        self.distro_series = str(options.get("distro_series") or "").strip()
        self.deploy_timeout_s = float(options.get("deploy_timeout_s", 3600))
        self.release_timeout_s = float(options.get("release_timeout_s", 3 * 3600))
        self.power_timeout_s = float(options.get("power_timeout_s", 300))
        self.poll_interval_s = float(options.get("poll_interval_s", 10))
        self.wipe_method = str(options.get("wipe_method") or "")
        self._sleep = sleep
        self._api: MaasApi | None = None
        self.ssh = SshDriver(target)

    def __repr__(self) -> str:
        return f"<MaasDriver {self.system_id or '?'} ({self.target.hostname})>"

    @property
    def api(self) -> MaasApi:
        if self._api is None:
            key = self.options.get("api_key")
            if not key:
                raise DriverError("no MAAS API key: set MAAS_API_KEY_FILE on the workers",
                                  permanent=True)
            self._api = MaasApi(str(self.options.get("url") or ""), MaasApiKey.parse(str(key)),
                                timeout_s=float(self.options.get("timeout_s", 30)),
                                verify_tls=self.options.get("verify_tls", True))
        return self._api

    # --- the protocol ------------------------------------------------------------------------
    def deploy_os(self, *, image: str, on_line: LineCallback) -> DeployFacts:
        """Allocates the machine, deploys ``image`` with Trainyard's cloud-init, and waits for
        Deployed while streaming MAAS's events; answers the host key to pin."""
        sid = self._require_system_id()
        series = self.distro_series or distro_series_for(image)
        machine = self.api.machine(sid)
        self._check_fence(machine)
        status, owner_data = machine.get("status_name"), machine.get("owner_data") or {}
        recorded_key = str(owner_data.get(HOST_KEY_KEY) or "")
        after = self._last_event_id(sid)  # progress: only what happens from now on
        if status in (DEPLOYING, DEPLOYED) and recorded_key:
            # An earlier execution's deploy: adopt it (fence it out), never start a second one.
            on_line(f"MAAS: {sid} is {status.lower()} by an earlier attempt; following it")
            self._take_fence(sid)
        else:
            if status == READY:
                on_line(f"MAAS: allocating {sid}" + (f" (tags {', '.join(self.tags)})" if self.tags else ""))
                self.api.allocate(system_id=sid, tags=self.tags,
                                  comment=f"Trainyard node {self.target.hostname}")
            elif status in RELEASING:
                raise DriverError(f"{self._where()}: MAAS is still releasing the machine ({status})",
                                  permanent=False)
            elif status not in ("Allocated", "Failed deployment"):
                raise DriverError(f"{self._where()}: the machine is {status!r} in MAAS; it must be "
                                  "Ready (commissioned, not deployed by anyone else) to be "
                                  "deployed", permanent=True)
            private, recorded_key = new_host_key()
            self._take_fence(sid, {HOST_KEY_KEY: recorded_key})
            on_line(f"MAAS: deploying {series} on {sid}")
            self.api.deploy(sid, user_data_b64=base64.b64encode(
                self._user_data(private, recorded_key).encode()).decode(),
                distro_series=series, comment=f"Trainyard node {self.target.hostname}")
            status = DEPLOYING
        if status != DEPLOYED:
            self._wait(sid, until=DEPLOYED, busy=(DEPLOYING, "Allocated"), failed=FAILED_DEPLOY,
                       timeout_s=self.deploy_timeout_s, on_line=on_line,
                       after=after, what="deploy")
        self._check_fence(self.api.machine(sid))
        on_line(f"MAAS: {sid} deployed ({series})")
        # From now on the delegate connects to the new install with its pinned key.
        self.ssh = SshDriver(replace(self.target, options={**self.options, "host_key": recorded_key}))
        return DeployFacts(image=image, installed=True, host_keys=(recorded_key,))

    def release(self, *, erase: bool, on_line: LineCallback) -> bool:
        """Releases the machine to MAAS, erasing its disks as the node's wipe method says, and
        waits until MAAS reports it Ready again."""
        sid = self._require_system_id()
        machine = self.api.machine(sid)
        status = machine.get("status_name")
        if status == READY:
            on_line(f"MAAS: {sid} is already released (Ready)")
            return erase
        after = self._last_event_id(sid)
        if status in RELEASABLE:
            self._check_fence(machine)
            flags = ERASE_FLAGS.get(self.wipe_method, {}) if erase else {}
            on_line(f"MAAS: releasing {sid}" + (f" with erase ({', '.join(flags) or 'zeros'})"
                                                 if erase else " without erasing"))
            self.api.release(sid, erase=erase, **flags,
                             comment=f"Trainyard: {self.target.hostname} handed back")
        elif status not in RELEASING:
            raise DriverError(f"{self._where()}: the machine is {status!r} in MAAS and cannot be "
                              "released from there", permanent=True)
        self._wait(sid, until=READY, busy=RELEASING + (DEPLOYED, "Allocated"),
                   failed=FAILED_RELEASE, timeout_s=self.release_timeout_s, on_line=on_line,
                   after=after, what="release", fenced=False)
        on_line(f"MAAS: {sid} is Ready again")
        return erase

    def engine_check(self) -> EngineCheck | None:
        """MAAS's word: the machine is Ready (released and erased as its wipe method says)."""
        sid = self._require_system_id()
        status = self.api.machine(sid).get("status_name") or "unknown"
        return EngineCheck(available=status == READY, text=f"MAAS: {sid} is {status}")

    def run(self, script: str, *, name: str, on_line: LineCallback,
            env: Mapping[str, str] | None = None, timeout_s: float = 1800) -> RunResult:
        return self.ssh.run(script, name=name, on_line=on_line, env=env, timeout_s=timeout_s)

    def health(self) -> HealthReport:
        return self.ssh.health()

    def power(self, action: str) -> None:
        """Through MAAS's power driver (the machine's BMC). Before a deploy the machine is not
        Trainyard's to power: ``on`` is then a no-op (deploying powers it on)."""
        if action not in POWER_ACTIONS:
            raise DriverError(f"unknown power action {action!r}; use on, off or reboot",
                              permanent=True)
        fence = self.target.fence
        if fence is not None and fence.cancelled:
            raise ExecutionStopped(f"{self._where()}: power {action} not sent: the claim was lost")
        sid = self._require_system_id()
        machine = self.api.machine(sid)
        if machine.get("status_name") != DEPLOYED:
            if action == "on":
                return
            raise DriverError(f"{self._where()}: the machine is {machine.get('status_name')!r} in "
                              "MAAS; only a deployed machine is powered by Trainyard",
                              permanent=True)
        self._check_fence(machine)
        if action in ("off", "reboot"):
            self.api.power_off(sid, comment=f"Trainyard: power {action}")
            self._wait_power(sid, "off")
        if action in ("on", "reboot"):
            if action == "reboot" or self.api.power_state(sid) != "on":
                self.api.power_on(sid, comment=f"Trainyard: power {action}")
            self._wait_power(sid, "on")

    # --- plumbing ----------------------------------------------------------------------------
    def _where(self) -> str:
        return f"{self.target.hostname} (MAAS {self.system_id or '?'})"

    def _require_system_id(self) -> str:
        """The node's ``system_id`` option, else the one MAAS machine with the node's hostname
        (never when a system_id is stored that is no id: that is refused, not guessed)."""
        if problem := self.options_schema.machine_problem(self.options):
            raise DriverError(f"{self.target.hostname}: {problem}", permanent=True)
        if not self.system_id:
            found = self.api.machines(hostname=self.target.hostname)
            if len(found) != 1:
                raise DriverError(f"{self.target.hostname}: MAAS has {len(found)} machines of that "
                                  "hostname; set the node's driver option system_id",
                                  permanent=True)
            self.system_id = str(found[0]["system_id"])
        return self.system_id

    def _check_fence(self, machine: Mapping) -> None:
        fence = self.target.fence
        if fence is None:
            return
        if fence.cancelled:
            raise ExecutionStopped(f"{self._where()}: cancelled (the claim was lost)")
        recorded = _int((machine.get("owner_data") or {}).get(FENCE_KEY))
        if recorded > fence.token:
            raise ExecutionStopped(f"{self._where()}: a newer execution holds the machine (fence "
                                   f"{recorded}, ours {fence.token}); stopping")

    def _take_fence(self, sid: str, extra: Mapping[str, str] | None = None) -> None:
        fence = self.target.fence
        data = dict(extra or {})
        if fence is not None:
            data[FENCE_KEY] = str(fence.token)
        if data:
            self.api.set_owner_data(sid, data)
        if fence is not None:
            # Read back: a newer execution that wrote meanwhile wins, and this one stops.
            recorded = _int((self.api.machine(sid).get("owner_data") or {}).get(FENCE_KEY))
            if recorded != fence.token:
                raise ExecutionStopped(f"{self._where()}: a newer execution took the machine "
                                       f"(fence {recorded}, ours {fence.token}); stopping")

    def _user_data(self, host_private: str, host_public: str) -> str:
        """Trainyard's cloud-config, plus the host key this install is to have."""
        return render_user_data(hostname=self.target.hostname, management_user=self.ssh.user,
                                management_keys=[self.ssh.management_public_key()],
                                host_key=(host_private, host_public))

    def _last_event_id(self, sid: str) -> int | None:
        events = self.api.events(sid, limit=1)
        return events[-1]["id"] if events else None

    def _wait(self, sid: str, *, until: str, busy: tuple[str, ...], failed: tuple[str, ...],
              timeout_s: float, on_line: LineCallback, after: int | None, what: str,
              fenced: bool = True) -> dict:
        deadline = time.monotonic() + timeout_s
        interval = min(self.poll_interval_s, 1.0)
        while True:
            machine = self.api.machine(sid)
            for event in self.api.events(sid, after=after):
                after = max(after or 0, int(event.get("id", 0)))
                on_line(f"MAAS: {event_text(event)}")
            if fenced:
                self._check_fence(machine)
            status = machine.get("status_name")
            if status == until:
                return machine
            if status in failed:
                raise DriverError(f"{self._where()}: {what} failed ({status}): "
                                  f"{self._failure_text(sid, machine)}", permanent=True)
            if status not in busy:
                raise DriverError(f"{self._where()}: MAAS moved the machine to {status!r} during "
                                  f"the {what}", permanent=True)
            if time.monotonic() >= deadline:
                raise DriverError(f"{self._where()}: the {what} is still {status!r} after "
                                  f"{timeout_s:g}s", permanent=False)
            self._sleep(min(interval, max(0.0, deadline - time.monotonic())))
            interval = min(interval * 2, self.poll_interval_s)

    def _failure_text(self, sid: str, machine: Mapping) -> str:
        events = self.api.events(sid, limit=20)
        errors = [e for e in events if str(e.get("level")).upper() in ("ERROR", "CRITICAL")]
        chosen = (errors or events)[-1:] if events else []
        text = event_text(chosen[0]) if chosen else ""
        detail = str(machine.get("error_description") or machine.get("status_message") or "")
        parts = [text] if text else []
        if detail and detail not in text:
            parts.append(detail)
        return "; ".join(parts) or "MAAS gave no reason"

    def _wait_power(self, sid: str, wanted: str) -> None:
        deadline = time.monotonic() + self.power_timeout_s
        interval = 1.0
        while True:
            state = self.api.power_state(sid)
            if state == wanted:
                return
            if time.monotonic() >= deadline:
                raise DriverError(f"{self._where()}: power is {state!r}, not {wanted!r}, after "
                                  f"{self.power_timeout_s:g}s", permanent=False)
            self._sleep(min(interval, max(0.0, deadline - time.monotonic())))
            interval = min(interval * 2, self.poll_interval_s)


def distro_series_for(image: str) -> str:
    """``ubuntu-24.04-cuda-12.8`` → ``ubuntu/24.04`` (MAAS takes ``os/version`` or a codename)."""
    match = _IMAGE.match((image or "").strip().lower())
    if not match:
        raise DriverError(f"cannot tell the MAAS distro series of image {image!r}: set "
                          "MAAS_DISTRO_SERIES (e.g. ubuntu/noble)", permanent=True)
    return f"{match['os']}/{match['version']}"


def event_text(event: Mapping) -> str:
    kind, description = str(event.get("type") or ""), str(event.get("description") or "")
    return f"{kind}: {description}" if kind and description else (kind or description)


def _int(value) -> int:
    try:
        return int(value)
    except (TypeError, ValueError):
        return 0
