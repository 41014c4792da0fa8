"""The acceptance report: typed, stored in ``StepRun.result`` (``AcceptanceResult``) and read by
the server page and ``GET /api/v1/orders/{ref}/server``.

Rows written before train-smoke (a health script and four checks) read back too: unknown keys
are ignored and a check without ``status`` takes it from ``ok``.

Numbers that are not finite (a diverged loss is ``NaN``) never reach a field: JSON has no NaN
and PostgreSQL refuses the ``NaN`` token Python's json writes, so they read as ``None`` (and a
loss curve ends where it stopped being finite).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field

from provisioning.acceptance.markers import ERROR_MARKER, JOB_MARKER, NODE_MARKER
from provisioning.pipeline.context import StepResult

__all__ = ["ERROR_MARKER", "JOB_MARKER", "NODE_MARKER", "AcceptanceCheck", "AcceptanceReport",
           "AcceptanceResult", "CheckpointRoundTrip", "ReportUnreadable", "find_marker", "job_fields"]
STATUSES = ("pass", "fail", "skip")


class ReportUnreadable(ValueError):
    """A marker line that is not the JSON object the node scripts print."""


@dataclass(frozen=True)
class AcceptanceCheck(StepResult):
    name: str = ""
    ok: bool = False
    detail: str = ""
    status: str = ""  # pass | fail | skip; "" in older rows (then ``ok`` says)
    node: str = ""  # the node that ran it; "" for the training job across all nodes
    value: float | None = None
    threshold: float | None = None
    unit: str = ""

    @property
    def outcome(self) -> str:
        return self.status if self.status in STATUSES else ("pass" if self.ok else "fail")

    @property
    def failed(self) -> bool:
        return self.outcome == "fail"

    @property
    def measured(self) -> str:
        """The check's number with its unit, for the report table ("" when it has none)."""
        return _with_unit(self.value, self.unit)

    @property
    def limit(self) -> str:
        return _with_unit(self.threshold, self.unit)

    @classmethod
    def from_node(cls, data: dict, *, node: str = "") -> AcceptanceCheck:
        status = data.get("status") if data.get("status") in STATUSES else "fail"
        return cls(name=str(data.get("name") or "unnamed check"), ok=status != "fail",
                   detail=str(data.get("detail") or ""), status=status, node=node,
                   value=_float(data.get("value")), threshold=_float(data.get("threshold")),
                   unit=str(data.get("unit") or ""))


@dataclass(frozen=True)
class CheckpointRoundTrip(StepResult):
    ok: bool = False
    bucket: bool = False  # False: no bucket ordered, saved and loaded on the node only
    prefix: str = ""
    bytes: int = 0
    tensors: int = 0
    mismatched: int = 0
    save_s: float = 0.0
    load_s: float = 0.0
    upload_mib_per_s: float | None = None
    download_mib_per_s: float | None = None

    @property
    def size(self) -> str:
        return _with_unit(self.bytes, "bytes")


@dataclass(frozen=True)
class AcceptanceReport(StepResult):
    passed: bool = False
    checks: tuple[AcceptanceCheck, ...] = ()
    gpu_count: int = 0
    expected_gpu_count: int = 0
    max_temperature_c: float | None = None
    ecc_errors: int = 0
    output_tail: tuple[str, ...] = ()
    # From train-smoke (absent in older rows):
    simulated: bool = False
    test_host: bool = False
    nodes: int = 0
    world_size: int = 0
    device: str = ""
    autocast: str = ""
    parameters: int = 0
    versions: dict = field(default_factory=dict)
    ddp_losses: tuple[float, ...] = ()
    fsdp_losses: tuple[float, ...] = ()
    tokens_per_s: dict = field(default_factory=dict)
    allreduce_busbw_gbps: float | None = None
    peak_memory_bytes: int | None = None  # the job's largest max_memory_allocated (CUDA only)
    checkpoint: CheckpointRoundTrip | None = None

    @classmethod
    def from_dict(cls, data: dict | None) -> AcceptanceReport:
        data = data if isinstance(data, dict) else {}
        report = super().from_dict(data)
        ckpt = data.get("checkpoint")
        return cls(**{**report.__dict__,
                      "checks": tuple(AcceptanceCheck.from_dict(c) for c in data.get("checks") or ()),
                      "output_tail": tuple(data.get("output_tail") or ()),
                      "versions": dict(data.get("versions") or {}),
                      "tokens_per_s": dict(data.get("tokens_per_s") or {}),
                      "ddp_losses": tuple(data.get("ddp_losses") or ()),
                      "fsdp_losses": tuple(data.get("fsdp_losses") or ()),
                      "checkpoint": CheckpointRoundTrip.from_dict(ckpt) if isinstance(ckpt, dict) else None})

    @property
    def failed_checks(self) -> str:
        return "; ".join(f"{_where(c)}{c.name} ({c.detail})" for c in self.checks if c.failed)

    @property
    def sparkline(self) -> Sparkline | None:
        return Sparkline.of(self.ddp_losses, self.fsdp_losses)

    @property
    def version_rows(self) -> tuple[tuple[str, str], ...]:
        labels = {"driver": "NVIDIA driver", "cuda": "CUDA", "torch": "PyTorch", "nccl": "NCCL",
                  "backend": "Backend", "strategy": "Stack", "accelerate": "Accelerate",
                  "deepspeed": "DeepSpeed", "torchtitan": "torchtitan", "transformers": "Transformers",
                  "python": "Python", "gpu": "GPU"}
        return tuple((labels.get(k, k), v) for k, v in self.versions.items() if v)

    @property
    def trained(self) -> bool:
        """Whether this report carries a training run (rows before train-smoke do not)."""
        return bool(self.ddp_losses or self.fsdp_losses)


@dataclass(frozen=True)
class Sparkline:
    """Two loss curves (DDP, FSDP2) as SVG polyline points in a WIDTH × HEIGHT box, one scale."""

    WIDTH = 240
    HEIGHT = 48
    ddp_points: str
    fsdp_points: str
    first: float
    last: float
    steps: int
    curve: str = "FSDP2"  # whose loss ``first`` and ``last`` are

    @classmethod
    def of(cls, *curves: tuple[float, ...]) -> Sparkline | None:
        values = [v for curve in curves for v in curve]
        if not values or max(len(c) for c in curves) < 2:
            return None
        top, bottom = max(values), min(values)
        span = (top - bottom) or 1.0
        steps = max(len(c) for c in curves)

        def points(curve) -> str:
            return " ".join(f"{cls.WIDTH * i / (steps - 1):.1f},"
                            f"{2 + (cls.HEIGHT - 4) * (top - v) / span:.1f}" for i, v in enumerate(curve))

        ddp, fsdp = (curves + ((), ()))[:2]
        first, last = loss_ends(fsdp or ddp)
        return cls(ddp_points=points(ddp), fsdp_points=points(fsdp), first=first, last=last,
                   steps=steps, curve="FSDP2" if fsdp else "DDP")


def loss_ends(losses) -> tuple[float, float]:
    """The mean loss of the first and of the last sixth of the steps: what train-smoke's
    ``loss_check`` compares, so the headline and the "loss falls" checks say the same numbers."""
    window = max(1, len(losses) // 6)
    return sum(losses[:window]) / window, sum(losses[-window:]) / window


def _with_unit(value: float | None, unit: str) -> str:
    if value is None:
        return ""
    if unit == "fraction":
        return f"{value:.0%}"
    if unit == "bytes":
        return f"{value / 1e9:.2f} GB" if value >= 1e9 else f"{value / 1e6:.1f} MB"
    if unit == "°C":
        return f"{value:.0f} °C"
    number = f"{value:.1f}" if value != int(value) else f"{value:.0f}"
    return f"{number} {unit}".strip()


def _where(check: AcceptanceCheck) -> str:
    return f"{check.node}: " if check.node else ""


@dataclass(frozen=True)
class AcceptanceResult(StepResult):
    report: AcceptanceReport = AcceptanceReport()

    @classmethod
    def from_dict(cls, data: dict | None) -> AcceptanceResult:
        data = data if isinstance(data, dict) else {}
        return cls(report=AcceptanceReport.from_dict(data.get("report")))


def find_marker(lines, marker: str) -> dict | None:
    """The JSON object after the last ``marker`` in ``lines``; None when there is none. The
    marker may stand anywhere in its line (another process's output can land in front of it);
    ``NaN`` and ``Infinity`` read as None."""
    found = None
    for line in lines:
        at = line.rfind(marker + " ")
        if at >= 0:
            found = line[at + len(marker) + 1:].strip()
    if found is None:
        return None
    try:
        data = json.loads(found, parse_constant=lambda _: None)
    except ValueError as exc:
        raise ReportUnreadable(f"{marker} line is not JSON: {exc}") from None
    if not isinstance(data, dict):
        raise ReportUnreadable(f"{marker} line holds {type(data).__name__}, not an object")
    return data


def job_fields(job: dict) -> dict:
    """The report fields train-smoke's JSON fills (everything but the checks)."""
    ckpt = job.get("checkpoint") if isinstance(job.get("checkpoint"), dict) else None
    losses = job.get("losses") if isinstance(job.get("losses"), dict) else {}
    model = job.get("model") if isinstance(job.get("model"), dict) else {}
    bandwidths = job.get("bandwidths") if isinstance(job.get("bandwidths"), dict) else {}
    fields = {
        "simulated": bool(job.get("simulated")), "test_host": bool(job.get("test_host")),
        "nodes": _int(job.get("nnodes")), "world_size": _int(job.get("world_size")),
        "device": str(job.get("device") or ""), "autocast": str(job.get("autocast") or ""),
        "parameters": _int(model.get("parameters")),
        "versions": {str(k): str(v) for k, v in (job.get("versions") or {}).items()},
        "ddp_losses": _floats(losses.get("ddp")), "fsdp_losses": _floats(losses.get("fsdp2")),
        "tokens_per_s": {str(k): _float(v) for k, v in (job.get("throughput") or {}).items()
                         if _float(v) is not None},
        "allreduce_busbw_gbps": _float(bandwidths.get("allreduce_busbw_gbps")),
        "peak_memory_bytes": _int(job.get("peak_memory_bytes")) or None,
    }
    if ckpt is not None:
        fields["checkpoint"] = CheckpointRoundTrip(
            ok=bool(ckpt.get("ok")), bucket=bool(ckpt.get("bucket")), prefix=str(ckpt.get("prefix") or ""),
            bytes=_int(ckpt.get("bytes")), tensors=_int(ckpt.get("tensors")),
            mismatched=_int(ckpt.get("mismatched")), save_s=_float(ckpt.get("save_s")) or 0.0,
            load_s=_float(ckpt.get("load_s")) or 0.0,
            upload_mib_per_s=_float(bandwidths.get("upload_mib_per_s")),
            download_mib_per_s=_float(bandwidths.get("download_mib_per_s")))
    return fields


def _int(value) -> int:
    number = _float(value)
    return int(number) if number is not None else 0


def _float(value) -> float | None:
    """A finite number, else None (booleans, strings, NaN and infinities are not numbers here)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if math.isfinite(value) else None


def _floats(values) -> tuple[float, ...]:
    """A loss curve up to its first value that is not a finite number (where it diverged)."""
    curve = []
    for value in values or ():
        number = _float(value)
        if number is None:
            break
        curve.append(number)
    return tuple(curve)
