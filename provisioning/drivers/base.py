"""The contract every node driver implements. Drivers do the I/O; the pipeline decides.

A driver is built for one node: ``DriverClass(target: NodeTarget)``. ``target.options`` is
``settings.NODE_DRIVER_OPTIONS[name]`` overlaid with the node's own ``driver_options`` JSON
(e.g. ssh port, user, pinned host key; for the simulated driver delays and failure injection).

Errors: raise :class:`DriverError` with ``permanent=True`` when retrying cannot help (bad
credentials, host key mismatch, unknown image) and ``permanent=False`` for what may pass
(connection refused, timeout, node busy). A script that ran and exited non-zero is not a
driver error: ``run`` returns its exit status and the pipeline decides.

Fencing: the pipeline builds the driver with ``target.fence`` (a :class:`Fence`: the claim's
fencing token, increasing per node, and a cancel event). Before each operation the node side
records the token and refuses one older than the newest it has seen; it stops (or waits for) an
earlier execution that still works on the node; and it checks the token again before the
operation reports success. A refused or cancelled operation raises :class:`ExecutionStopped`.
Without a fence (health checks outside the pipeline) nothing is checked.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, runtime_checkable

from provisioning.drivers.options import OptionsSchema

LineCallback = Callable[[str], None]
PowerAction = Literal["on", "off", "reboot"]
POWER_ACTIONS: tuple[str, ...] = ("on", "off", "reboot")


class DriverError(Exception):
    """A driver could not do what was asked. ``permanent`` says whether a retry can help."""

    def __init__(self, message: str, *, permanent: bool = False):
        super().__init__(message)
        self.message = message
        self.permanent = permanent

    def __str__(self) -> str:
        return self.message


class ExecutionStopped(DriverError):
    """The node refused this execution (a newer claim holds it) or the worker cancelled it
    (its claim was lost). Not permanent: the step itself may be fine; whoever holds the claim
    now carries on."""

    def __init__(self, message: str):
        super().__init__(message, permanent=False)


# Exit status of the node-side guard when a newer execution holds the node (ssh driver).
FENCED_EXIT_STATUS = 79


@dataclass(frozen=True)
class Fence:
    """The claim an operation runs under. ``token`` increases per node with every claim;
    ``execution`` names the claim in logs; ``cancel`` is set when the worker lost the claim."""

    token: int
    execution: str = ""
    cancel: threading.Event = field(default_factory=threading.Event, compare=False)

    @property
    def cancelled(self) -> bool:
        return self.cancel.is_set()


@dataclass(frozen=True)
class NodeTarget:
    """What a driver needs to know about the node it acts on."""

    hostname: str
    address: str  # management address: "host" or "host:port"
    gpu_count: int = 0  # what the SKU promises; health() reports what is there
    gpu_name: str = ""
    options: Mapping[str, Any] = field(default_factory=dict)
    fence: Fence | None = None  # the claim the pipeline's operations carry


def split_address(address: str, default_port: int) -> tuple[str, int]:
    """``"host"``, ``"host:port"`` or ``"[v6]:port"`` → (host, port)."""
    address = (address or "").strip()
    if not address:
        raise DriverError("the node has no management address", permanent=True)
    if address.startswith("["):  # [v6]:port
        host, _, rest = address[1:].partition("]")
        return host, int(rest[1:]) if rest.startswith(":") else default_port
    if address.count(":") == 1:
        host, port = address.split(":")
        return host, int(port)
    return address, default_port


RETRY_EXIT_STATUS = 75  # sysexits.h EX_TEMPFAIL: a script asks to be run again later


@dataclass(frozen=True)
class RunResult:
    exit_status: int
    output_tail: tuple[str, ...] = ()  # the last lines, for an error message

    @property
    def ok(self) -> bool:
        return self.exit_status == 0

    @property
    def asks_retry(self) -> bool:
        return self.exit_status == RETRY_EXIT_STATUS


@dataclass(frozen=True)
class GpuReading:
    index: int
    name: str
    temperature_c: float
    ecc_errors: int  # uncorrected ECC errors (volatile)
    memory_total_mib: int | None = None


@dataclass(frozen=True)
class HealthReport:
    gpus: tuple[GpuReading, ...]
    raw: str = ""  # the tool's own output (nvidia-smi CSV), for operators

    @property
    def gpu_count(self) -> int:
        return len(self.gpus)

    @property
    def max_temperature_c(self) -> float | None:
        return max((g.temperature_c for g in self.gpus), default=None)

    @property
    def ecc_errors(self) -> int:
        return sum(g.ecc_errors for g in self.gpus)


@dataclass(frozen=True)
class DeployFacts:
    """What ``deploy_os`` leaves for the pipeline: the image on the node, whether this call
    installed it, and the SSH host keys to pin from now on (an imaging engine makes new ones with
    each install; empty: the pinned keys stand)."""

    image: str
    installed: bool = False
    host_keys: tuple[str, ...] = ()


@dataclass(frozen=True)
class EngineCheck:
    """What an imaging engine says of a machine in its pool, with no OS of ours on it: whether it
    is cleaned and free to deploy (Ironic ``available``, MAAS ``Ready``; not in maintenance),
    in the engine's own words. Nodes an engine erases enter and return to stock on this, not on
    an SSH check of a system that is not there."""

    available: bool
    text: str


@runtime_checkable
class NodeDriver(Protocol):
    """One node's hands. Every method may raise DriverError."""

    name: str  # "simulated", "ssh", …
    simulated: bool  # True when no real machine is behind the node (no access to hand over)
    options_schema: OptionsSchema  # what it reads of a node (drivers/options.py)

    def __init__(self, target: NodeTarget) -> None: ...

    def deploy_os(self, *, image: str, on_line: LineCallback) -> DeployFacts:
        """(Re)installs the operating system image, or checks the one there where the driver
        cannot install; streams progress lines to ``on_line``."""
        ...

    def release(self, *, erase: bool, on_line: LineCallback) -> bool:
        """Hands the node back after a tenant. With ``erase`` an imaging engine erases the disks
        itself (Ironic's cleaning, MAAS's erase) and this answers True; a driver that cannot
        answers False, and the pipeline's sanitise script cleans the node."""
        ...

    def engine_check(self) -> EngineCheck | None:
        """The engine's word on a machine in its pool; None where no engine erases this node
        (it is checked, baselined and attested over SSH)."""
        ...

    def run(self, script: str, *, name: str, on_line: LineCallback,
            env: Mapping[str, str] | None = None, timeout_s: float = 1800) -> RunResult:
        """Runs a shell script on the node, streaming each output line to ``on_line``.

        ``name`` labels the script in logs and lets test drivers inject faults by step.
        A non-zero exit is returned, not raised; a timeout raises DriverError (transient).
        """
        ...

    def power(self, action: PowerAction) -> None:
        """on, off or reboot; returns when the node has acknowledged."""
        ...

    def health(self) -> HealthReport:
        """GPU count, temperature and ECC errors, e.g. from ``nvidia-smi --query-gpu``."""
        ...
