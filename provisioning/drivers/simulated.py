"""A node that exists only in a journal file: realistic delays, failure injection, no hardware.

The embedded default for ``make run`` and the driver of the test suite and the bench.
Options (``settings.NODE_DRIVER_OPTIONS["simulated"]`` overlaid by ``Node.driver_options``):

- ``delay_scale``: multiplies every delay; ``0`` is the zero-delay mode for tests and the bench.
- ``delays``: seconds per operation or script name, e.g. ``{"deploy_os": 8, "acceptance": 4}``.
- ``fail``: failure injection per operation or script name:
  ``{"configure": {"transient": 2}}`` fails the first two calls with a transient DriverError,
  ``{"deploy_os": {"permanent": "image checksum mismatch"}}`` fails every call permanently.
- ``exit_status``: ``{"acceptance": 1}`` makes that script exit non-zero.
- ``gpu_count`` / ``temperature_c`` / ``ecc_errors``: what ``health()`` reports.
- ``state_dir``: where the journal lives (default ``settings.SIMULATED_DRIVER_STATE_DIR``).

The journal (one JSON line per event, written under an exclusive lock) is the node's memory
across processes: it counts injected failures and lets tests count side effects. Each entry
carries the fencing token of the operation (``fence``, 0 without one).

Fencing, the node's side (see ``drivers.base``): ``<hostname>.fence`` holds the newest token
seen and the operation now busy on the node. An operation with an older token is refused
(journal: ``fenced``); one with a newer token takes the node and waits until the busy, older one
has stopped (or its process is gone). A busy operation checks its token and the cancel event
while it works and stops (``fenced`` / ``cancelled``) when either says so, and checks the token
again before it records ``ok``.
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

from django.conf import settings

from provisioning.acceptance.simulated import simulated_lines
from provisioning.drivers.base import (
    POWER_ACTIONS,
    DeployFacts,
    DriverError,
    EngineCheck,
    ExecutionStopped,
    GpuReading,
    HealthReport,
    LineCallback,
    NodeTarget,
    OptionsSchema,
    RunResult,
)
from provisioning.stack.shell import header_values

DEFAULT_DELAYS_S = {"deploy_os": 6.0, "power": 1.5, "run": 1.0, "health": 0.2}
POLL_S = 0.05  # how often a busy operation looks at its fence and cancel event
TAKEOVER_WAIT_S = 30.0  # how long a newer execution waits for an older one to stop
_ECHO = re.compile(r"""^\s*echo\s+(?P<text>.+?)\s*$""")


def _state_dir(options: Mapping) -> Path:
    return Path(options.get("state_dir") or settings.SIMULATED_DRIVER_STATE_DIR)


def journal_path(hostname: str, state_dir: str | Path | None = None) -> Path:
    base = Path(state_dir) if state_dir else Path(settings.SIMULATED_DRIVER_STATE_DIR)
    return base / f"{hostname}.jsonl"


def read_journal(hostname: str, state_dir: str | Path | None = None) -> list[dict]:
    path = journal_path(hostname, state_dir)
    if not path.exists():
        return []
    with path.open(encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]


_ENDS = ("ok", "fenced", "cancelled", "aborted")


def journal_overlaps(journal: list[dict]) -> list[tuple[str, str]]:
    """Pairs of operations of two executions that ran on the node at the same time.

    An operation is open from its ``start`` to its end (``ok``, ``exit N``, ``fenced``,
    ``cancelled``, ``aborted``); an execution is (pid, fence). For tests and ``bench/pipeline_faults.py``."""
    open_ops: dict[tuple, str] = {}
    found = []
    for e in journal:
        who = (e.get("pid"), e.get("fence", 0))
        if e["event"] == "start":
            found += [(name, e["name"]) for other, name in open_ops.items() if other != who]
            open_ops[who] = e["name"]
        elif e["event"] in _ENDS or e["event"].startswith("exit "):
            open_ops.pop(who, None)
    return found


def journal_completed(journal: list[dict]) -> dict[str, int]:
    """How many times each operation completed (``ok``) on the node."""
    done: dict[str, int] = {}
    for e in journal:
        if e["event"] == "ok":
            done[e["name"]] = done.get(e["name"], 0) + 1
    return done


class SimulatedDriver:
    name = "simulated"
    simulated = True  # no machine behind it: the server page says so instead of an ssh line
    options_schema = OptionsSchema(fabric_from_management=True)

    def __init__(self, target: NodeTarget) -> None:
        self.target = target
        self.options = dict(target.options)
        scale = self.options.get("delay_scale", settings.SIMULATED_DRIVER_DELAY_SCALE)
        self.delay_scale = float(scale)
        self.path = journal_path(target.hostname, _state_dir(self.options))

    # --- the protocol ---------------------------------------------------------------------
    def deploy_os(self, *, image: str, on_line: LineCallback) -> DeployFacts:
        if not image:
            raise DriverError("no OS image given", permanent=True)
        self._begin("deploy_os", "deploy_os")
        with self._holding("deploy_os", "deploy_os"):
            on_line(f"PXE boot {self.target.hostname}, image {image}")
            self._sleep_with_progress("deploy_os", on_line, label="writing image")
            self._check("deploy_os", "deploy_os")
            on_line(f"{image} installed; node rebooted into the new system")
            self._finish("deploy_os", "deploy_os", "ok")
        # an imaging engine's new host keys, when a test asks for them (option host_keys_after_deploy)
        return DeployFacts(image=image, installed=True,
                           host_keys=tuple(self.options.get("host_keys_after_deploy") or ()))

    def engine_check(self) -> EngineCheck | None:
        """With option ``engine_erases``: an engine whose pool holds the machine, cleaned (or, with
        ``engine_unavailable``, one that reports it in maintenance)."""
        if not self.options.get("engine_erases"):
            return None
        if self.options.get("engine_unavailable"):
            return EngineCheck(available=False, text="simulated engine: in maintenance")
        return EngineCheck(available=True, text="simulated engine: available")

    def release(self, *, erase: bool, on_line: LineCallback) -> bool:
        """Like an imaging engine with option ``engine_erases``; otherwise the sanitise script."""
        if not (erase and self.options.get("engine_erases")):
            return False
        self._begin("release", "release")
        with self._holding("release", "release"):
            on_line(f"erasing {self.target.hostname}'s disks")
            self._sleep_with_progress("release", on_line, label="erasing")
            self._finish("release", "release", "ok")
        return True

    def run(self, script: str, *, name: str, on_line: LineCallback,
            env: Mapping[str, str] | None = None, timeout_s: float = 1800) -> RunResult:
        self._begin("run", name)
        with self._holding("run", name):
            return self._run(script, name=name, on_line=on_line, env=env)

    def _run(self, script: str, *, name: str, on_line: LineCallback,
             env: Mapping[str, str] | None) -> RunResult:
        tail: list[str] = []
        for line in self._script_output(script, name=name, env=env or {}):
            on_line(line)
            tail = (tail + [line])[-20:]
        self._sleep_with_progress(name, on_line, label=name, default_key="run")
        status = int(self.options.get("exit_status", {}).get(name, 0))
        if status:
            line = f"{name}: simulated failure, exit status {status}"
            on_line(line)
            tail.append(line)
        self._finish("run", name, "ok" if status == 0 else f"exit {status}")
        return RunResult(exit_status=status, output_tail=tuple(tail[-20:]))

    def _script_output(self, script: str, *, name: str, env: Mapping[str, str]) -> list[str]:
        """What the script "prints": its echo lines with the environment and its header's values
        filled in; an acceptance script answers a plausible report that says it is simulated."""
        report = simulated_lines(script, hostname=self.target.hostname,
                                 gpus=int(self.options.get("gpu_count", self.target.gpu_count)),
                                 nnodes=int(env.get("TRAINYARD_NNODES", "1") or 1))
        if name.startswith("acceptance") and report:
            return report
        lines = []
        values = {**header_values(script), **env}
        for line in script.splitlines():
            match = _ECHO.match(line)
            if match:
                text = match["text"].strip("'\"")
                for key, value in values.items():
                    text = text.replace(f"${key}", value).replace(f"${{{key}}}", value)
                lines.append(text)
        return lines

    def power(self, action: str) -> None:
        if action not in POWER_ACTIONS:
            raise DriverError(f"unknown power action {action!r}; use on, off or reboot",
                              permanent=True)
        self._begin("power", f"power_{action}")
        with self._holding("power", f"power_{action}"):
            self._sleep(self._delay("power"), op="power", name=f"power_{action}")
            self._finish("power", f"power_{action}", "ok")

    def health(self) -> HealthReport:
        self._begin("health", "health", journal_start=False)
        self._sleep(self._delay("health"))
        count = int(self.options.get("gpu_count", self.target.gpu_count))
        temperature = float(self.options.get("temperature_c", 41.0))
        ecc = int(self.options.get("ecc_errors", 0))
        gpus = tuple(
            GpuReading(index=i, name=self.target.gpu_name or "Simulated GPU",
                       temperature_c=temperature + (i % 3), ecc_errors=ecc if i == 0 else 0)
            for i in range(count)
        )
        raw = "\n".join(f"{g.index}, {g.name}, {g.temperature_c:.0f}, {g.ecc_errors}" for g in gpus)
        return HealthReport(gpus=gpus, raw=raw)

    # --- failure injection and the journal --------------------------------------------------
    def _begin(self, op: str, name: str, *, journal_start: bool = True) -> None:
        spec = self.options.get("fail", {}).get(name) or self.options.get("fail", {}).get(op)
        if spec:
            if "permanent" in spec:
                self._record(op, name, "permanent")
                raise DriverError(f"{name}: {spec['permanent']}", permanent=True)
            wanted = int(spec.get("transient", 0))
            failed = self._count(name, "transient")
            if failed < wanted:
                self._record(op, name, "transient")
                raise DriverError(
                    f"{name}: simulated transient failure {failed + 1} of {wanted}", permanent=False)
        if journal_start:
            self._take_node(op, name)

    # --- fencing (the node's side) ----------------------------------------------------------
    @property
    def _fence_path(self) -> Path:
        return self.path.with_suffix(".fence")

    @contextmanager
    def _node_lock(self) -> Iterator[dict]:
        """The node's fence state under an exclusive lock; changes to the dict are saved."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self.path.with_suffix(".lock").open("a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                path = self._fence_path
                state = json.loads(path.read_text()) if path.exists() else {}
                state.setdefault("token", 0)
                state.setdefault("busy", None)
                before = dict(state)
                yield state
                if state != before:
                    path.write_text(json.dumps(state))
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)

    def _take_node(self, op: str, name: str) -> None:
        """Records the start of an operation; with a fence, first takes the node for it."""
        fence = self.target.fence
        if fence is None:
            self._record(op, name, "start")
            return
        give_up = time.monotonic() + TAKEOVER_WAIT_S
        while True:
            with self._node_lock() as state:
                if fence.token < state["token"]:
                    self._record(op, name, "fenced")
                    raise ExecutionStopped(f"{self.target.hostname}: a newer execution holds the "
                                           f"node (fence {state['token']}, ours {fence.token})")
                state["token"] = fence.token  # an older busy operation sees this and stops
                busy = state["busy"]
                if not busy or busy["token"] == fence.token or not _alive(busy["pid"]):
                    state["busy"] = {"token": fence.token, "pid": os.getpid(), "name": name}
                    self._record(op, name, "start")
                    return
            if fence.cancelled:
                self._record(op, name, "cancelled")
                raise ExecutionStopped(f"{self.target.hostname}: {name} cancelled")
            if time.monotonic() > give_up:
                raise DriverError(f"{self.target.hostname}: an earlier execution "
                                  f"({busy['name']}, fence {busy['token']}) has not stopped yet",
                                  permanent=False)
            time.sleep(POLL_S)

    @contextmanager
    def _holding(self, op: str, name: str) -> Iterator[None]:
        """An operation that dies (time limit, a crash in a callback) frees the node and says
        so in the journal (``aborted``), so the next execution does not wait for it."""
        try:
            yield
        except ExecutionStopped:
            raise  # already recorded and freed
        except BaseException:
            if self.target.fence is not None:
                with self._node_lock() as state:
                    busy = state["busy"]
                    if busy and busy["token"] == self.target.fence.token and busy["pid"] == os.getpid():
                        state["busy"] = None
            self._record(op, name, "aborted")
            raise

    def _check(self, op: str, name: str) -> None:
        """While busy: stop if a newer execution took the node or the worker cancelled us."""
        fence = self.target.fence
        if fence is None:
            return
        with self._node_lock() as state:
            event = ("fenced" if state["token"] != fence.token
                     else "cancelled" if fence.cancelled else None)
            if event is None:
                return
            if state["busy"] and state["busy"]["token"] == fence.token:
                state["busy"] = None
            self._record(op, name, event)
        raise ExecutionStopped(f"{self.target.hostname}: {name} stopped "
                               f"({'a newer execution took the node' if event == 'fenced' else 'cancelled'})")

    def _finish(self, op: str, name: str, event: str) -> None:
        """Records the end of an operation: with a fence, only if it still holds the node."""
        if self.target.fence is None:
            self._record(op, name, event)
            return
        self._check(op, name)
        with self._node_lock() as state:
            if state["token"] != self.target.fence.token:  # lost it just now
                self._record(op, name, "fenced")
                raise ExecutionStopped(f"{self.target.hostname}: a newer execution took the node")
            self._record(op, name, event)
            if state["busy"] and state["busy"]["token"] == self.target.fence.token:
                state["busy"] = None

    def _count(self, name: str, event: str) -> int:
        return sum(1 for e in self._read() if e["name"] == name and e["event"] == event)

    def _read(self) -> list[dict]:
        return read_journal(self.target.hostname, self.path.parent)

    def _record(self, op: str, name: str, event: str) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fence = self.target.fence
        line = json.dumps({"op": op, "name": name, "event": event, "pid": os.getpid(),
                           "at": time.time(), "fence": fence.token if fence else 0,
                           "execution": fence.execution if fence else ""})
        with self.path.open("a", encoding="utf-8") as fh:
            fcntl.flock(fh, fcntl.LOCK_EX)
            fh.write(line + "\n")
            fh.flush()
            fcntl.flock(fh, fcntl.LOCK_UN)

    # --- time ---------------------------------------------------------------------------------
    def _delay(self, key: str, default_key: str | None = None) -> float:
        delays = {**DEFAULT_DELAYS_S, **self.options.get("delays", {})}
        base = delays.get(key, delays.get(default_key or key, 0.0))
        return float(base) * self.delay_scale

    def _sleep(self, seconds: float, *, op: str = "", name: str = "") -> None:
        """Sleeps, looking at the fence and the cancel event now and then (``op``/``name``)."""
        end = time.monotonic() + seconds
        while (left := end - time.monotonic()) > 0:
            time.sleep(min(left, POLL_S))
            if op:
                self._check(op, name)

    def _sleep_with_progress(self, key: str, on_line: LineCallback, *, label: str,
                             default_key: str | None = None) -> None:
        total = self._delay(key, default_key)
        if total <= 0:
            return
        ticks = 4
        op = "deploy_os" if key == "deploy_os" else "run"
        for i in range(1, ticks + 1):
            self._sleep(total / ticks, op=op, name=key if key == "deploy_os" else label)
            on_line(f"{label}: {i * 100 // ticks}%")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
