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
across processes: it counts injected failures and lets tests count side effects.
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import time
from collections.abc import Mapping
from pathlib import Path

from django.conf import settings

from provisioning.drivers.base import (
    POWER_ACTIONS,
    DriverError,
    GpuReading,
    HealthReport,
    LineCallback,
    NodeTarget,
    RunResult,
)

DEFAULT_DELAYS_S = {"deploy_os": 6.0, "power": 1.5, "run": 1.0, "health": 0.2}
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


class SimulatedDriver:
    name = "simulated"
    simulated = True  # no machine behind it: the server page says so instead of an ssh line

    def __init__(self, target: NodeTarget) -> None:
        self.target = target
        self.options = dict(target.options)
        scale = self.options.get("delay_scale", settings.SIMULATED_DRIVER_DELAY_SCALE)
        self.delay_scale = float(scale)
        self.path = journal_path(target.hostname, _state_dir(self.options))

    # --- the protocol ---------------------------------------------------------------------
    def deploy_os(self, *, image: str, on_line: LineCallback) -> None:
        if not image:
            raise DriverError("no OS image given", permanent=True)
        self._begin("deploy_os", "deploy_os")
        on_line(f"PXE boot {self.target.hostname}, image {image}")
        self._sleep_with_progress("deploy_os", on_line, label="writing image")
        on_line(f"{image} installed; node rebooted into the new system")
        self._record("deploy_os", "deploy_os", "ok")

    def run(self, script: str, *, name: str, on_line: LineCallback,
            env: Mapping[str, str] | None = None, timeout_s: float = 1800) -> RunResult:
        self._begin("run", name)
        tail: list[str] = []
        for line in script.splitlines():
            match = _ECHO.match(line)
            if match:
                text = match["text"].strip("'\"")
                for key, value in (env or {}).items():
                    text = text.replace(f"${key}", value).replace(f"${{{key}}}", value)
                on_line(text)
                tail = (tail + [text])[-20:]
        self._sleep_with_progress(name, on_line, label=name, default_key="run")
        status = int(self.options.get("exit_status", {}).get(name, 0))
        if status:
            line = f"{name}: simulated failure, exit status {status}"
            on_line(line)
            tail.append(line)
        self._record("run", name, "ok" if status == 0 else f"exit {status}")
        return RunResult(exit_status=status, output_tail=tuple(tail[-20:]))

    def power(self, action: str) -> None:
        if action not in POWER_ACTIONS:
            raise DriverError(f"unknown power action {action!r}; use on, off or reboot",
                              permanent=True)
        self._begin("power", f"power_{action}")
        self._sleep(self._delay("power"))
        self._record("power", f"power_{action}", "ok")

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
            self._record(op, name, "start")

    def _count(self, name: str, event: str) -> int:
        return sum(1 for e in self._read() if e["name"] == name and e["event"] == event)

    def _read(self) -> list[dict]:
        return read_journal(self.target.hostname, self.path.parent)

    def _record(self, op: str, name: str, event: str) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        line = json.dumps({"op": op, "name": name, "event": event, "pid": os.getpid(),
                           "at": time.time()})
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

    def _sleep(self, seconds: float) -> None:
        if seconds > 0:
            time.sleep(seconds)

    def _sleep_with_progress(self, key: str, on_line: LineCallback, *, label: str,
                             default_key: str | None = None) -> None:
        total = self._delay(key, default_key)
        if total <= 0:
            return
        ticks = 4
        for i in range(1, ticks + 1):
            time.sleep(total / ticks)
            on_line(f"{label}: {i * 100 // ticks}%")
