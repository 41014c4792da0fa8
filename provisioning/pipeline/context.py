"""What a step function works with: the run, order and node, the driver, a live log, and the
base of the typed results steps return (stored in ``StepRun.result`` via ``to_dict()``)."""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from django.db import InterfaceError, OperationalError, connection
from django.utils import timezone

from portal.orders.models import Order
from provisioning.drivers import DriverError, Fence, RunResult, driver_for, is_test_host
from provisioning.models import Node, ProvisioningRun, StepLogLine, StepRun
from provisioning.states import StepStatus


class StepFailed(Exception):
    """A step failed for a reason retrying cannot fix. The message is for staff."""

    def __init__(self, message: str, *, result: dict | None = None):
        super().__init__(message)
        self.message = message
        self.result = result or {}


class StepWaiting(Exception):
    """The step cannot start its work yet and nothing is wrong (e.g. a cluster's acceptance
    waits for the other nodes). Not a failed attempt: the engine looks again after
    ``retry_after_s`` without counting it against PROVISIONING_STEP_MAX_ATTEMPTS, until the
    step's deadline (counted from its first execution) has passed; then the step fails."""

    def __init__(self, message: str, *, retry_after_s: float = 15.0):
        super().__init__(message)
        self.message = message
        self.retry_after_s = retry_after_s


@dataclass(frozen=True)
class StepResult:
    """Base of each step's result: a frozen dataclass, stored as JSON (``to_dict``) and read back
    by selectors (``from_dict``, which ignores keys it does not know, so older rows still read)."""

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict | None):
        data = data if isinstance(data, dict) else {}
        known = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in known})


class LogWriter:
    """Collects the driver's output lines and writes them in small batches (live for the page).
    ``attempt`` is the execution number, so the lines of two executions never share a label.
    A database blip keeps the lines for the next flush instead of breaking the step.

    Two audiences: a plain call writes the full detail (script output, driver messages, accounts,
    addresses), which only staff read on the run page; ``say`` writes the customer's short
    progress line, which both read. Each step says one line; the engine adds retries and failures."""

    MAX_BUFFER = 2000

    def __init__(self, step_run_id: int, attempt: int):
        self.step_run_id, self.attempt = step_run_id, attempt
        self.buffer: list[StepLogLine] = []
        self.flushed_at = time.monotonic()
        self.said = False

    def say(self, line: str) -> None:
        """A line in the customer's words: what happened, nothing of how (no script text)."""
        self(line, staff_only=False)
        self.said = True

    def __call__(self, line: str, *, staff_only: bool = True) -> None:
        for part in (str(line).splitlines() or [""]):
            self.buffer.append(StepLogLine(step_run_id=self.step_run_id, at=timezone.now(),
                                           attempt=self.attempt, text=part[:4000],
                                           staff_only=staff_only))
        if len(self.buffer) >= 50 or time.monotonic() - self.flushed_at > 0.5:
            self.flush()

    def flush(self) -> None:
        if self.buffer:
            try:
                StepLogLine.objects.bulk_create(self.buffer)
                self.buffer = []
            except (OperationalError, InterfaceError):
                if not connection.in_atomic_block:
                    connection.close()
                self.buffer = self.buffer[-self.MAX_BUFFER:]
        self.flushed_at = time.monotonic()


@dataclass
class StepContext:
    run: ProvisioningRun
    order: Order
    node: Node
    step_run: StepRun
    log: LogWriter
    result: dict = field(default_factory=dict)  # partial result kept when the step fails
    fence: Fence | None = None  # the claim every driver operation carries

    def say(self, line: str) -> None:
        say = getattr(self.log, "say", None)  # a plain callable (a test's list.append) has none
        say(line) if say else self.log(line)

    @cached_property
    def driver(self):
        return driver_for(self.node, fence=self.fence)

    def driver_options_changed(self) -> None:
        """The node's driver options changed (host keys a new install made were pinned): the
        driver is built anew from them on its next use."""
        self.__dict__.pop("driver", None)

    @cached_property
    def cluster(self) -> list[Node]:
        swapped_out = StepRun.objects.filter(run=self.run, status=StepStatus.SKIPPED).values("node_id")
        ids = StepRun.objects.filter(run=self.run).exclude(node_id__in=swapped_out).values("node_id")
        return list(Node.objects.filter(pk__in=ids).order_by("hostname"))

    @property
    def rank(self) -> int:
        return next((i for i, n in enumerate(self.cluster) if n.pk == self.node.pk), 0)

    @property
    def env(self) -> dict[str, str]:
        return self.env_for(self.node)

    def env_for(self, node: Node) -> dict[str, str]:
        """The environment of a script on ``node`` (this step's node or another of the cluster).
        ``TRAINYARD_TEST_HOST`` is always set, from that node's own declaration, so one node's
        flag never carries over to another (nor does a host's own environment decide it)."""
        nodes = self.cluster
        rank = next((i for i, n in enumerate(nodes) if n.pk == node.pk), 0)
        return {
            "TRAINYARD_TEST_HOST": "1" if is_test_host(node) else "0",
            "TRAINYARD_ORDER": self.order.reference,
            "TRAINYARD_NODE": node.hostname,
            "TRAINYARD_NODE_RANK": str(rank),
            "TRAINYARD_NNODES": str(len(nodes)),
            "TRAINYARD_GPUS_PER_NODE": str(self.order.sku.gpu_count),
            "TRAINYARD_MASTER_ADDR": nodes[0].management_address.split(":")[0] if nodes else "",
        }

    def run_script(self, script: str, *, name: str, env: dict[str, str] | None = None) -> RunResult:
        self.log(f"$ running {name} script on {self.node.hostname}")
        result = self.driver.run(script, name=name, on_line=self.log, env={**self.env, **(env or {})})
        self.result["exit_status"] = result.exit_status
        if result.asks_retry:
            raise DriverError(f"{name} script on {self.node.hostname} asked to be retried later "
                              f"(exit {result.exit_status})", permanent=False)
        if not result.ok:
            last = result.output_tail[-1] if result.output_tail else "no output"
            raise StepFailed(f"{name} script exited with status {result.exit_status}: {last}",
                             result=self.result)
        return result
