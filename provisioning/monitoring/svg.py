"""The GPU charts as server-rendered SVG (no chart library, no JavaScript): one line per GPU of a
node, a y axis in the metric's unit, time along x. A <title> and <desc> carry the numbers for
screen readers; every string from data is escaped here."""

from __future__ import annotations

import math
from datetime import UTC, datetime
from html import escape

from django.utils import timezone

from provisioning.monitoring.series import Chart

PALETTE = ("#2457d6", "#12805c", "#c2571a", "#8e5bb5", "#e0a13a", "#0e7490", "#be185d", "#5b6675")
WIDTH, HEIGHT = 600, 220
LEFT, RIGHT, TOP, BOTTOM = 48, 592, 12, 190


def colour(index: int) -> str:
    return PALETTE[index % len(PALETTE)]


def nice_max(value: float) -> float:
    """The axis top: 1, 2 or 5 times a power of ten at or above ``value``."""
    if value <= 0:
        return 1.0
    power = 10 ** math.floor(math.log10(value))
    return next(m * power for m in (1, 2, 5, 10) if m * power >= value)


def _number(value: float) -> str:
    if abs(value) >= 1000:
        return f"{value / 1000:,.{0 if value % 1000 == 0 else 1}f}k"
    return f"{value:,.0f}" if abs(value) >= 10 or value == int(value) else f"{value:,.1f}"


def _time_label(ts: float, span_s: float) -> str:
    at = timezone.localtime(datetime.fromtimestamp(ts, tz=UTC))
    return at.strftime("%H:%M") if span_s <= 2 * 86400 else at.strftime("%-d %b")


def node_chart_svg(chart: Chart, node: str, *, chart_id: str) -> str:
    series = chart.for_node(node)
    start, end = chart.start.timestamp(), chart.end.timestamp()
    span = max(end - start, 1.0)
    values = [v for s in series for _, v in s.points]
    top = chart.max_value if chart.max_value is not None else nice_max(max(values, default=0) * 1.1)
    if chart.unit == "events":
        top = max(top, 4.0)  # whole events: ticks 0, 1, 2, 3, 4 rather than fractions

    def x(t: float) -> float:
        return LEFT + (RIGHT - LEFT) * (t - start) / span

    def y(v: float) -> float:
        return BOTTOM - (BOTTOM - TOP) * min(max(v, 0.0), top) / top

    title = f"{chart.label} of {node}, {chart.range_label.lower()}"
    if values:
        desc = (f"{len(series)} GPU{'s' if len(series) != 1 else ''}; "
                f"lowest {_number(min(values))} {chart.unit}, highest {_number(max(values))} {chart.unit}, "
                f"mean {_number(sum(values) / len(values))} {chart.unit}")
    else:
        desc = "No samples in this window."
    out = [f'<svg class="chart gpu-chart" id="{escape(chart_id)}" viewBox="0 0 {WIDTH} {HEIGHT}" '
           f'role="img" aria-labelledby="{escape(chart_id)}-title {escape(chart_id)}-desc" '
           f'xmlns="http://www.w3.org/2000/svg">',
           f'<title id="{escape(chart_id)}-title">{escape(title)}</title>',
           f'<desc id="{escape(chart_id)}-desc">{escape(desc)}</desc>', '<g class="axis">']
    for i in range(5):
        value = top * i / 4
        at = y(value)
        out.append(f'<line class="grid-line" x1="{LEFT}" x2="{RIGHT}" y1="{at:.1f}" y2="{at:.1f}"/>')
        out.append(f'<text class="tick" x="{LEFT - 6}" y="{at + 4:.1f}" text-anchor="end">'
                   f'{_number(value)}</text>')
    for i, anchor in enumerate(("start", "middle", "end")):
        t = start + span * i / 2
        out.append(f'<text class="tick" x="{x(t):.1f}" y="{HEIGHT - 8}" text-anchor="{anchor}">'
                   f'{_time_label(t, span)}</text>')
    out.append(f'<line class="axis-line" x1="{LEFT}" x2="{RIGHT}" y1="{BOTTOM}" y2="{BOTTOM}"/></g>')
    if not values:
        out.append(f'<text class="muted" x="{(LEFT + RIGHT) / 2}" y="{(TOP + BOTTOM) / 2}" '
                   f'text-anchor="middle">No data in this window yet</text>')
    for index, s in enumerate(series):
        path = " ".join(f"{x(t):.1f},{y(v):.1f}" for t, v in s.points)
        if len(s.points) == 1:
            (t, v), = s.points
            out.append(f'<circle class="series" cx="{x(t):.1f}" cy="{y(v):.1f}" r="2.5" '
                       f'fill="{colour(index)}"><title>{escape(s.label)}</title></circle>')
        elif path:
            out.append(f'<polyline class="series" points="{path}" fill="none" '
                       f'stroke="{colour(index)}" stroke-width="1.6" stroke-linejoin="round">'
                       f'<title>{escape(s.label)}</title></polyline>')
    out.append("</svg>")
    return "".join(out)
