"""The chart queries: a fixed allow-list of metrics and ranges, and PromQL built here from an
order's reference only. Nothing a customer sends becomes part of a query except by choosing a
key of METRICS and RANGES; the order label's value is escaped (PURE: no Django, no I/O)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Metric:
    key: str
    label: str
    unit: str
    # PromQL with {selector} for the order's label matcher and {step} for windows. Gauges are
    # averaged over each step, so a 7-day chart shows the load, not the one sample a step hits.
    expr: str
    max_value: float | None = None  # a fixed top of the axis (percentages); else the data's


# dcgm-exporter's fields (etc/default-counters.csv of NVIDIA/dcgm-exporter), per node and GPU.
METRICS = {m.key: m for m in (
    Metric("gpu_util", "GPU utilisation", "%",
           "max by (node, gpu) (avg_over_time(DCGM_FI_DEV_GPU_UTIL{selector}[{step}s]))", 100.0),
    Metric("tensor_active", "Tensor-core activity", "%",
           "100 * max by (node, gpu) "
           "(avg_over_time(DCGM_FI_PROF_PIPE_TENSOR_ACTIVE{selector}[{step}s]))", 100.0),
    Metric("fb_used", "Framebuffer used", "GiB",
           "max by (node, gpu) (avg_over_time(DCGM_FI_DEV_FB_USED{selector}[{step}s])) / 1024"),
    Metric("power", "Power", "W",
           "max by (node, gpu) (avg_over_time(DCGM_FI_DEV_POWER_USAGE{selector}[{step}s]))"),
    Metric("temperature", "Temperature", "°C",
           "max by (node, gpu) (avg_over_time(DCGM_FI_DEV_GPU_TEMP{selector}[{step}s]))"),
    # The field holds the last XID's number: each change of it is one XID event.
    Metric("xid", "XID events", "events",
           "sum by (node, gpu) (changes(DCGM_FI_DEV_XID_ERRORS{selector}[{step}s]))"),
)}


@dataclass(frozen=True)
class Range:
    key: str
    label: str
    seconds: int | None  # None: since the order started


RANGES = {r.key: r for r in (Range("1h", "1 hour", 3600), Range("24h", "24 hours", 86400),
                              Range("7d", "7 days", 7 * 86400), Range("life", "Order life", None))}
POINTS = 120  # per series and chart: enough for a 600-px-wide line, light to fetch
MIN_STEP_S = 15  # Prometheus's default scrape interval: a finer step only repeats samples


def metric_for(key: str) -> Metric:
    if key not in METRICS:
        raise ValueError(f"Unknown metric {key!r}: choose one of {', '.join(METRICS)}.")
    return METRICS[key]


def range_for(key: str) -> Range:
    if key not in RANGES:
        raise ValueError(f"Unknown range {key!r}: choose one of {', '.join(RANGES)}.")
    return RANGES[key]


def label_value(value: str) -> str:
    """``value`` as a PromQL double-quoted string literal (backslash, quote, newline escaped)."""
    escaped = value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
    return f'"{escaped}"'


def step_for(seconds: float) -> int:
    return max(MIN_STEP_S, int(seconds // POINTS))


def order_query(metric: Metric, *, order_reference: str, step_s: int) -> str:
    """The PromQL of ``metric`` for one order's nodes: the only matcher is the order label the
    portal's scrape targets write, so no other order's series can match."""
    if not order_reference:
        raise ValueError("An order reference is required.")
    selector = "{order=" + label_value(order_reference) + "}"
    return metric.expr.replace("{selector}", selector).replace("{step}", str(int(step_s)))
