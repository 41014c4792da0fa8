"""Server-rendered SVG charts for the sizing results (no chart library, no JavaScript).

Both take the recommender's JSON shapes (plan and point dicts) and return SVG markup with a
<title>, a <desc> and the values written as text, so screen readers and printouts get the
numbers too. Every string that comes from data is escaped here.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from html import escape

from portal.core.units import gb, hours_compact, usd_compact

# (key in memory_breakdown_bytes, label, colour); unknown keys are drawn grey at the end.
MEMORY_PARTS = (
    ("weights", "Weights", "#2457d6"),
    ("gradients", "Gradients", "#7aa2ff"),
    ("optimizer_states", "Optimizer states", "#12805c"),
    ("activations", "Activations", "#e0a13a"),
    ("logits_and_loss", "Logits and loss", "#c2571a"),
    ("transient", "Backward peak", "#8e5bb5"),
    ("gathered_buffers", "Gathered buffers", "#5b6675"),
    ("framework_overhead", "Framework overhead", "#b8c2d0"),
)
OTHER_COLOUR = "#d0d5dd"


def plan_label(plan: dict, rank: int | None = None) -> str:
    gpu = plan.get("gpu_name", plan.get("gpu", "")).replace("NVIDIA ", "")
    server = f"{plan.get('gpus_per_node', '?')}× {gpu}"
    if plan.get("nodes", 1) > 1:
        server = f"{plan['nodes']} nodes of {server}"
    return f"#{rank} {server}" if rank else server


def memory_parts(plan: dict) -> list[tuple[str, str, str, int]]:
    """(key, label, colour, bytes) for each non-zero memory term, in drawing order."""
    breakdown = dict(plan.get("memory_breakdown_bytes") or {})
    parts = [(k, label, colour, int(breakdown.pop(k, 0))) for k, label, colour in MEMORY_PARTS]
    parts += [(k, k.replace("_", " ").capitalize(), OTHER_COLOUR, int(v)) for k, v in breakdown.items()]
    return [p for p in parts if p[3] > 0]


def memory_chart(plans: list[dict], *, chart_id: str = "memory-chart") -> str:
    """One stacked bar per plan: what each GPU holds, against its capacity and usable memory."""
    if not plans:
        return ""
    width, left, right, row = 600, 4, 596, 64
    scale_max = max(max(p.get("gpu_memory_bytes") or 0, p.get("per_gpu_total_bytes") or 0) for p in plans)
    scale_max = scale_max or 1
    span = right - left

    def x(v: float) -> float:
        return left + span * v / scale_max

    height = row * len(plans) + 8
    out = [
        f'<svg class="chart" id="{chart_id}" viewBox="0 0 {width} {height}" role="img" '
        f'aria-labelledby="{chart_id}-title {chart_id}-desc" xmlns="http://www.w3.org/2000/svg">',
        f'<title id="{chart_id}-title">Memory per GPU for each plan</title>',
        f'<desc id="{chart_id}-desc">{escape(_memory_desc(plans))}</desc>',
    ]
    for i, plan in enumerate(plans):
        top = i * row + 4
        capacity = plan.get("gpu_memory_bytes") or 0
        usable = plan.get("usable_memory_bytes") or capacity
        total = plan.get("per_gpu_total_bytes") or 0
        label = plan_label(plan, i + 1)
        out.append(f'<g class="bar" aria-label="{escape(label)}">')
        out.append(f'<text x="{left}" y="{top + 17}" font-size="15" font-weight="600">{escape(label)}</text>')
        out.append(f'<text x="{right}" y="{top + 17}" font-size="15" text-anchor="end">'
                   f'{gb(total)} of {capacity / 1e9:,.0f} GB</text>')
        bar_y = top + 26
        out.append(f'<rect x="{left}" y="{bar_y}" width="{x(capacity) - left:.1f}" height="22" rx="3" '
                   f'fill="#eef1f5"><title>GPU capacity {gb(capacity)}</title></rect>')
        pos = left
        for _key, name, colour, value in memory_parts(plan):
            w = span * value / scale_max
            out.append(f'<rect x="{pos:.1f}" y="{bar_y}" width="{w:.1f}" height="22" fill="{colour}">'
                       f'<title>{escape(name)}: {gb(value)}</title></rect>')
            pos += w
        if usable and usable < capacity:
            ux = x(usable)
            out.append(f'<line x1="{ux:.1f}" x2="{ux:.1f}" y1="{bar_y - 3}" y2="{bar_y + 25}" '
                       f'stroke="#17202c" stroke-width="1.5" stroke-dasharray="3 2">'
                       f'<title>Usable: {gb(usable)} '
                       f'(capacity minus a reserve)</title></line>')
        out.append(f'<line x1="{x(capacity):.1f}" x2="{x(capacity):.1f}" y1="{bar_y - 3}" y2="{bar_y + 25}" '
                   f'stroke="#17202c" stroke-width="2"><title>Capacity: {gb(capacity)}</title></line>')
        out.append("</g>")
    out.append("</svg>")
    return "".join(out)


def _memory_desc(plans: list[dict]) -> str:
    return " ".join(
        f"{plan_label(p, i + 1)}: {gb(p.get('per_gpu_total_bytes') or 0)} of "
        f"{gb(p.get('gpu_memory_bytes') or 0)} per GPU ("
        + ", ".join(f"{name} {gb(v)}" for _k, name, _c, v in memory_parts(p)) + ")."
        for i, p in enumerate(plans)
    )


def memory_legend(plans: list[dict]) -> list[tuple[str, str]]:
    """(label, colour) of the terms that appear in any plan, in drawing order."""
    seen: dict[str, str] = {}
    for plan in plans:
        for _k, name, colour, _v in memory_parts(plan):
            seen.setdefault(name, colour)
    return list(seen.items())


# --- Cost vs time -------------------------------------------------------------------------
# Both axes follow one rule: linear, unless the values span more than LOG_RATIO×, then log.
LOG_RATIO = 20
MAX_TICKS = 7
CHAR_WIDTH = 0.6  # of the font size: a safe estimate of a tick label's width (for overlap)


@dataclass(frozen=True)
class Axis:
    lo: float
    hi: float
    log: bool
    ticks: tuple[tuple[float, str], ...]  # (value, label), labels that do not overlap

    def scale(self, a: float, b: float):
        lo, hi = (math.log10(self.lo), math.log10(self.hi)) if self.log else (self.lo, self.hi)
        span = (hi - lo) or 1.0

        def f(v: float) -> float:
            v = math.log10(v) if self.log else v
            return a + (b - a) * (v - lo) / span
        return f


def _bounds(values: list[float]) -> tuple[float, float, bool]:
    lo, hi = min(values), max(values)
    if lo > 0 and hi / lo > LOG_RATIO:
        return lo / 1.3, hi * 1.3, True
    pad = (hi - lo) * 0.08 or max(hi * 0.1, 0.01)
    return max(0.0, lo - pad), hi + pad, False


def _linear_ticks(lo: float, hi: float) -> list[float]:
    """Round steps (1, 2, 5 × 10ⁿ): the finest that gives at most MAX_TICKS ticks, so at least
    three (a step is at most 2.5× the one before it)."""
    span = (hi - lo) or 1.0
    exp = math.floor(math.log10(span)) - 2
    while True:
        for m in (1, 2, 5):
            step = m * 10 ** exp
            start = math.ceil(lo / step) * step
            ticks = [start + i * step for i in range(int((hi - start) / step + 1e-9) + 1)]
            if len(ticks) <= MAX_TICKS:
                return [round(t, 10) for t in ticks]
        exp += 1


def _log_ticks(lo: float, hi: float) -> list[float]:
    """1, 2, 5 × 10ⁿ; on a wide range only the powers of ten (every other one if still many)."""
    decades = range(math.floor(math.log10(lo)), math.ceil(math.log10(hi)) + 1)
    for mantissas in ((1, 2, 5), (1, 3), (1,)):
        ticks = [m * 10 ** e for e in decades for m in mantissas if lo <= m * 10 ** e <= hi]
        if len(ticks) <= MAX_TICKS:
            return ticks or [lo, hi]
    return ticks[::2] if len(ticks) > 1 else ticks


TIME_TICKS = (  # hours, label
    (1 / 60, "1 min"), (5 / 60, "5 min"), (15 / 60, "15 min"), (0.5, "30 min"), (1, "1 h"), (2, "2 h"),
    (5, "5 h"), (12, "12 h"), (24, "1 day"), (48, "2 days"), (96, "4 days"), (168, "1 week"),
    (336, "2 weeks"), (720, "1 month"), (2160, "3 months"), (8760, "1 year"),
)


def _time_ticks(lo: float, hi: float) -> list[tuple[float, str]]:
    ticks = [(v, label) for v, label in TIME_TICKS if lo <= v <= hi]
    while len(ticks) > MAX_TICKS:
        ticks = ticks[::2]
    return ticks or [(lo, hours_compact(lo)), (hi, hours_compact(hi))]


def axis(values: list[float], *, unit: str) -> Axis:
    """The axis for ``values`` (``unit``: "usd" or "hours"): bounds, scale and labelled ticks."""
    lo, hi, log = _bounds(values)
    if unit == "hours" and log:
        ticks = _time_ticks(lo, hi)
    else:
        label = usd_compact if unit == "usd" else hours_compact
        ticks = [(t, label(t)) for t in (_log_ticks(lo, hi) if log else _linear_ticks(lo, hi))]
    return Axis(lo=lo, hi=hi, log=log, ticks=tuple(ticks))


def _spaced(ticks, position, *, size: float, font: float, horizontal: bool) -> list:
    """The ticks whose labels do not overlap the one kept before them (``size``: label extent
    along the axis; horizontal labels by their estimated width, vertical ones by the font)."""
    kept, last = [], None
    for value, label in ticks:
        p = position(value)
        extent = len(label) * CHAR_WIDTH * font if horizontal else font
        if last is None or abs(p - last[0]) >= (extent + last[1]) / 2 + size:
            kept.append((value, label, p))
            last = (p, extent)
    return kept


PHONE_TICK_FONT = 21  # static/css/app.css: tick labels at phone width (user units), the larger size


def _clear_corner(x_ticks: list, y_ticks: list, *, left: float, axis_y: float) -> tuple[list, list]:
    """The ticks without a clash in the bottom-left corner: the first time label (centred under
    its tick) and the lowest cost label (right-aligned before the axis) can meet there at the
    phone font. Drops the clashing label of the axis with more labels, until they are apart."""
    font = PHONE_TICK_FONT
    while x_ticks and y_ticks and min(len(x_ticks), len(y_ticks)) > 2:
        (_, x_label, px), (_, y_label, py) = x_ticks[0], y_ticks[0]
        half = len(x_label) * CHAR_WIDTH * font / 2
        y_width = len(y_label) * CHAR_WIDTH * font
        apart_x = px - half >= left - 8 or left - 8 - y_width >= px + half
        apart_y = py + 5 + 0.3 * font <= axis_y + 20 - font
        if apart_x or apart_y:
            break
        if len(y_ticks) > len(x_ticks):
            y_ticks = y_ticks[1:]
        else:
            x_ticks = x_ticks[1:]
    return x_ticks, y_ticks


# Offsets of a plan's number from its ring (text baseline), nearest first.
LABEL_SPOTS = ((11, -11), (11, 20), (-11, -11), (-11, 20), (0, -15), (0, 28),
               (11, -28), (11, 37), (-11, -28), (-11, 37), (30, 5), (-30, 5))


def _place_labels(marks: list[tuple[float, float, str]], *, box: tuple[float, float, float, float],
                  font: float = 18) -> list[tuple[float, float, str, str]]:
    """Where each plan's "#n" goes: beside its ring, on the first side where it overlaps no label
    placed before it and stays inside the plot. Returns (x, y, anchor, text). Sized for the
    larger font the page uses at phone width (18), so the labels stay apart at both sizes."""
    left, top, right, bottom = box
    placed: list[tuple[float, float, float, float]] = []
    out = []
    for cx, cy, text in marks:
        w, h = len(text) * CHAR_WIDTH * font + 2, font
        choice = None
        for dx, dy in LABEL_SPOTS:
            anchor = "start" if dx > 0 else "end" if dx < 0 else "middle"
            x0 = cx + dx if dx > 0 else cx + dx - w if dx < 0 else cx - w / 2
            rect = (x0, cy + dy - h, x0 + w, cy + dy)
            inside = rect[0] >= left and rect[2] <= right and rect[1] >= top and rect[3] <= bottom
            free = all(rect[2] <= r[0] or rect[0] >= r[2] or rect[3] <= r[1] or rect[1] >= r[3]
                       for r in placed)
            if inside and free:
                choice = (cx + dx, cy + dy, anchor, rect)
                break
        if choice is None:  # crowded: the first spot, clamped into the plot
            x = min(max(cx + 11, left), right - w)
            choice = (x, max(cy - 11, top + h), "start", (x, cy - 11 - h, x + w, cy - 11))
        placed.append(choice[3])
        out.append((choice[0], choice[1], choice[2], text))
    return out


def cost_time_chart(points: list[dict], plans: list[dict], *, chart_id: str = "cost-chart") -> str:
    """Every feasible configuration as a dot (time → cost); the Pareto front joined and filled;
    the ranked plans ringed and numbered. Each axis is log when its values span more than 20×.
    Every other tick label is "minor": the page hides those at phone width, where the labels
    are drawn larger (static/css/app.css)."""
    rows = [p for p in points if p.get("train_hours", 0) > 0 and p.get("price_total_usd", 0) > 0]
    marks = [p for p in plans if p.get("train_hours", 0) > 0 and p.get("price_total_usd", 0) > 0]
    if not rows and not marks:
        return ""
    width, height, ml, mr, mt, mb = 600, 390, 80, 20, 34, 56
    x_axis = axis([p["train_hours"] for p in rows + marks], unit="hours")
    y_axis = axis([p["price_total_usd"] for p in rows + marks], unit="usd")
    fx, fy = x_axis.scale(ml, width - mr), y_axis.scale(height - mb, mt)

    def at(p: dict) -> tuple[float, float]:
        return fx(p["train_hours"]), fy(p["price_total_usd"])

    front = sorted((p for p in rows if p.get("pareto")), key=lambda p: p["train_hours"])
    return "".join([
        f'<svg class="chart" id="{chart_id}" viewBox="0 0 {width} {height}" role="img" '
        f'aria-labelledby="{chart_id}-title {chart_id}-desc" xmlns="http://www.w3.org/2000/svg">',
        f'<title id="{chart_id}-title">Job cost against training time for {len(rows)} '
        f'feasible configurations</title>',
        f'<desc id="{chart_id}-desc">{escape(_cost_desc(rows, front, marks))}</desc>',
        *_cost_axes(x_axis, y_axis, fx, fy, box=(ml, mt, width - mr, height - mb), height=height),
        *_cost_points(rows, at), *_cost_front(front, at),
        *_plan_rings(marks, at, box=(ml, mt, width - mr, height - mb)),
        "</svg>",
    ])


def _cost_axes(x_axis, y_axis, fx, fy, *, box, height: int) -> list[str]:
    left, top, right, bottom = box
    out = ['<g class="axis">']
    x_ticks = _spaced(x_axis.ticks, fx, size=8, font=13, horizontal=True)
    y_ticks = _spaced(y_axis.ticks, fy, size=4, font=13, horizontal=False)
    x_ticks, y_ticks = _clear_corner(x_ticks, y_ticks, left=left, axis_y=bottom)
    for i, (_t, label, px) in enumerate(x_ticks):
        minor = " tick-minor" if i % 2 and len(x_ticks) > 3 else ""
        out.append(f'<line class="grid-line" x1="{px:.1f}" x2="{px:.1f}" y1="{top}" y2="{bottom}"/>'
                   f'<text class="tick{minor}" x="{px:.1f}" y="{bottom + 20}" font-size="13" '
                   f'text-anchor="middle">{escape(label)}</text>')
    for i, (_t, label, py) in enumerate(y_ticks):
        minor = " tick-minor" if i % 2 and len(y_ticks) > 4 else ""
        out.append(f'<line class="grid-line" x1="{left}" x2="{right}" y1="{py:.1f}" y2="{py:.1f}"/>'
                   f'<text class="tick{minor}" x="{left - 8}" y="{py + 5:.1f}" font-size="13" '
                   f'text-anchor="end">{escape(label)}</text>')
    out.append(f'<line class="axis-line" x1="{left}" x2="{right}" y1="{bottom}" y2="{bottom}"/>'
               f'<line class="axis-line" x1="{left}" x2="{left}" y1="{top}" y2="{bottom}"/>')
    out.append(f'<text class="axis-title" x="{(left + right) / 2}" y="{height - 10}" font-size="14" '
               f'text-anchor="middle">Training time{" (log scale)" if x_axis.log else ""}</text>')
    out.append(f'<text class="axis-title" x="4" y="18" font-size="14" text-anchor="start">'
               f'Job cost (USD{", log scale" if y_axis.log else ""})</text>')
    out.append("</g>")
    return out


def _cost_points(rows: list[dict], at) -> list[str]:
    """The configurations off the Pareto front, as grey dots."""
    out = ['<g class="points">']
    for p in rows:
        if p.get("pareto"):
            continue
        x, y = at(p)
        out.append(f'<circle cx="{x:.1f}" cy="{y:.1f}" r="3.5" '
                   f'fill="#98a2b3" fill-opacity=".55"><title>{escape(_point_title(p))}</title></circle>')
    out.append("</g>")
    return out


def _cost_front(front: list[dict], at) -> list[str]:
    if not front:
        return []
    path = " ".join(f"{x:.1f},{y:.1f}" for x, y in map(at, front))
    out = [f'<polyline class="pareto-line" points="{path}" fill="none" stroke="#2457d6" '
           f'stroke-width="2" stroke-dasharray="5 3"/>', '<g class="pareto">']
    for p in front:
        x, y = at(p)
        out.append(f'<circle cx="{x:.1f}" cy="{y:.1f}" r="5.5" '
                   f'fill="#2457d6"><title>Pareto front: {escape(_point_title(p))}</title></circle>')
    out.append("</g>")
    return out


def _plan_rings(marks: list[dict], at, *, box) -> list[str]:
    """The ranked plans ringed, numbered #1, #2, … with labels placed clear of each other."""
    out = ['<g class="plans">']
    rings = [(*at(p), f"#{i + 1}") for i, p in enumerate(marks)]
    for p, (cx, cy, text) in zip(marks, rings, strict=True):
        out.append(f'<circle cx="{cx:.1f}" cy="{cy:.1f}" r="9" fill="none" stroke="#17202c" stroke-width="2">'
                   f'<title>{escape(plan_label(p, int(text[1:])))}: {hours_compact(p["train_hours"])}, '
                   f'{usd_compact(p["price_total_usd"])}</title></circle>')
    for tx, ty, anchor, text in _place_labels(rings, box=box):
        out.append(f'<text x="{tx:.1f}" y="{ty:.1f}" font-size="14" font-weight="700" '
                   f'text-anchor="{anchor}">{text}</text>')
    out.append("</g>")
    return out


def _point_title(p: dict) -> str:
    nodes = f"{p['nodes']} nodes of " if p.get("nodes", 1) > 1 else ""
    layout = p.get("strategy", "")
    if p.get("tp", 1) > 1:
        layout += f", TP {p['tp']}"
    if p.get("pp", 1) > 1:
        layout += f", PP {p['pp']}"
    return (f"{nodes}{p.get('sku', '')}, {layout}: {hours_compact(p['train_hours'])}, "
            f"{usd_compact(p['price_total_usd'])}")


def _cost_desc(rows: list[dict], front: list[dict], plans: list[dict]) -> str:
    parts = [f"{len(rows)} configurations fit; {len(front)} are on the Pareto front "
             "(nothing else is both faster and cheaper)."]
    parts += [f"{plan_label(p, i + 1)}: {hours_compact(p['train_hours'])} for "
              f"{usd_compact(p['price_total_usd'])}." for i, p in enumerate(plans)]
    return " ".join(parts)
