"""The server page's GPU charts card without a database: the simulated series (what `make run`
shows) and the SVG of six metrics for one node of 8 GPUs, per range, and the size of the SVG the
page carries. Prints a table; tests never assert on speed.

    .venv/bin/python bench/gpu_charts_bench.py
"""

from __future__ import annotations

import os
import statistics
import sys
import time
from datetime import timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings")

import django  # noqa: E402

django.setup()

from django.utils import timezone  # noqa: E402

from provisioning.monitoring.queries import METRICS, RANGES, step_for  # noqa: E402
from provisioning.monitoring.series import Chart  # noqa: E402
from provisioning.monitoring.sources import NodeInfo, SimulatedSource  # noqa: E402
from provisioning.monitoring.svg import node_chart_svg  # noqa: E402

ROUNDS = int(os.environ.get("BENCH_ROUNDS", "5"))
NODE = NodeInfo("gpu-bench-01", 8)


def card(range_key: str, now) -> int:
    seconds = RANGES[range_key].seconds or 30 * 86400  # "life": a 30-day order
    start, step = now - timedelta(seconds=seconds), step_for(seconds)
    size = 0
    for metric in METRICS.values():
        series = SimulatedSource().series(metric, order_reference="O-BENCH", nodes=[NODE],
                                          start=start, end=now, step_s=step)
        chart = Chart(metric=metric.key, label=metric.label, unit=metric.unit, range=range_key,
                      range_label=RANGES[range_key].label, start=start, end=now, step_s=step,
                      max_value=metric.max_value, series=tuple(series), simulated=True,
                      nodes=(NODE.hostname,))
        size += len(node_chart_svg(chart, NODE.hostname, chart_id=f"gpu-{metric.key}"))
    return size


def main() -> None:
    now = timezone.now()
    rows = []
    for range_key in RANGES:
        times = []
        for _ in range(ROUNDS):
            started = time.perf_counter()
            size = card(range_key, now)
            times.append(time.perf_counter() - started)
        rows.append((range_key, statistics.median(times) * 1000, min(times) * 1000, size))
    base = rows[0][1]
    print(f"GPU charts card, simulated, 1 node × 8 GPUs × {len(METRICS)} metrics, "
          f"median of {ROUNDS} rounds")
    print(f"{'range':<6} {'ms (median)':>12} {'ms (min)':>9} {'× 1h':>6} {'SVG KiB':>8}")
    for key, median, best, size in rows:
        print(f"{key:<6} {median:>12.1f} {best:>9.1f} {median / base:>6.2f} {size / 1024:>8.1f}")


if __name__ == "__main__":
    main()
