"""Server-rendered SVG charts for the sizing results (no chart library, no JavaScript).

Both take the recommender's JSON shapes (plan and point dicts) and return SVG markup with a
<title>, a <desc> and the values written as text, so screen readers and printouts get the
numbers too. Every string that comes from data is escaped here.
"""

from __future__ import annotations

import math
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
        server = f"{plan['nodes']} × {server}"
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
def _scale(lo: float, hi: float, a: float, b: float, log: bool):
    if log:
        lo, hi = math.log10(lo), math.log10(hi)
    span = (hi - lo) or 1.0

    def f(v: float) -> float:
        v = math.log10(v) if log else v
        return a + (b - a) * (v - lo) / span
    return f


def _ticks(lo: float, hi: float, log: bool) -> list[float]:
    if log:
        ticks = []
        for exp in range(math.floor(math.log10(lo)), math.ceil(math.log10(hi)) + 1):
            for m in (1, 2, 5):
                v = m * 10 ** exp
                if lo <= v <= hi:
                    ticks.append(v)
        return ticks or [lo, hi]
    step = 10 ** math.floor(math.log10((hi - lo) or 1))
    for m in (1, 2, 5, 10):
        if (hi - lo) / (step * m) <= 6:
            step *= m
            break
    start = math.ceil(lo / step) * step
    return [start + i * step for i in range(int((hi - start) / step) + 1)]


def _bounds(values: list[float]) -> tuple[float, float, bool]:
    lo, hi = min(values), max(values)
    log = lo > 0 and hi / lo > 20
    if log:
        return lo / 1.3, hi * 1.3, True
    pad = (hi - lo) * 0.08 or max(hi * 0.1, 0.01)
    return max(0.0, lo - pad), hi + pad, False


TIME_TICKS = (  # hours, label
    (1 / 60, "1 min"), (5 / 60, "5 min"), (15 / 60, "15 min"), (0.5, "30 min"), (1, "1 h"), (2, "2 h"),
    (5, "5 h"), (12, "12 h"), (24, "1 day"), (48, "2 days"), (96, "4 days"), (168, "1 week"),
    (336, "2 weeks"), (720, "1 month"), (2160, "3 months"), (8760, "1 year"),
)


def _time_ticks(lo: float, hi: float) -> list[tuple[float, str]]:
    ticks = [(v, label) for v, label in TIME_TICKS if lo <= v <= hi]
    while len(ticks) > 8:
        ticks = ticks[::2]
    return ticks or [(lo, hours_compact(lo)), (hi, hours_compact(hi))]


def _usd_tick(v: float) -> str:
    if v >= 1000:
        return f"${v / 1000:,.{0 if v % 1000 == 0 or v >= 10_000 else 1}f}k"
    return f"${v:,.0f}" if v >= 10 or v == 0 else f"${v:,.2f}"


def cost_time_chart(points: list[dict], plans: list[dict], *, chart_id: str = "cost-chart") -> str:
    """Every feasible configuration as a dot (time → cost); the Pareto front joined and filled;
    the ranked plans ringed and numbered. Log axes when values span more than 20×."""
    rows = [p for p in points if p.get("train_hours", 0) > 0 and p.get("price_total_usd", 0) > 0]
    marks = [p for p in plans if p.get("train_hours", 0) > 0 and p.get("price_total_usd", 0) > 0]
    if not rows and not marks:
        return ""
    width, height, ml, mr, mt, mb = 600, 380, 74, 16, 16, 56
    xs = [p["train_hours"] for p in rows + marks]
    ys = [p["price_total_usd"] for p in rows + marks]
    x_lo, x_hi, x_log = _bounds(xs)
    y_lo, y_hi, y_log = _bounds(ys)
    fx = _scale(x_lo, x_hi, ml, width - mr, x_log)
    fy = _scale(y_lo, y_hi, height - mb, mt, y_log)
    front = sorted((p for p in rows if p.get("pareto")), key=lambda p: p["train_hours"])
    out = [
        f'<svg class="chart" id="{chart_id}" viewBox="0 0 {width} {height}" role="img" '
        f'aria-labelledby="{chart_id}-title {chart_id}-desc" xmlns="http://www.w3.org/2000/svg">',
        f'<title id="{chart_id}-title">Job cost against training time for {len(rows)} '
        f'feasible configurations</title>',
        f'<desc id="{chart_id}-desc">{escape(_cost_desc(rows, front, marks))}</desc>',
        '<g class="axis">',
    ]
    x_ticks = _time_ticks(x_lo, x_hi) if x_log else [(t, hours_compact(t)) for t in _ticks(x_lo, x_hi, False)]
    for t, label in x_ticks:
        px = fx(t)
        out.append(f'<line class="grid-line" x1="{px:.1f}" x2="{px:.1f}" y1="{mt}" y2="{height - mb}"/>'
                   f'<text class="tick" x="{px:.1f}" y="{height - mb + 20}" font-size="13" '
                   f'text-anchor="middle">'
                   f'{label}</text>')
    for t in _ticks(y_lo, y_hi, y_log):
        py = fy(t)
        out.append(f'<line class="grid-line" x1="{ml}" x2="{width - mr}" y1="{py:.1f}" y2="{py:.1f}"/>'
                   f'<text class="tick" x="{ml - 6}" y="{py + 5:.1f}" font-size="13" text-anchor="end">'
                   f'{_usd_tick(t)}</text>')
    out.append(f'<line class="axis-line" x1="{ml}" x2="{width - mr}" y1="{height - mb}" y2="{height - mb}"/>'
               f'<line class="axis-line" x1="{ml}" x2="{ml}" y1="{mt}" y2="{height - mb}"/>')
    out.append(f'<text x="{(ml + width - mr) / 2}" y="{height - 12}" font-size="14" text-anchor="middle">'
               f'Training time{" (log scale)" if x_log else ""}</text>')
    out.append(f'<text transform="translate(16 {(mt + height - mb) / 2}) rotate(-90)" font-size="14" '
               f'text-anchor="middle">Job cost (USD){" (log scale)" if y_log else ""}</text>')
    out.append("</g>")
    out.append('<g class="points">')
    for p in rows:
        if p.get("pareto"):
            continue
        out.append(f'<circle cx="{fx(p["train_hours"]):.1f}" cy="{fy(p["price_total_usd"]):.1f}" r="3.5" '
                   f'fill="#98a2b3" fill-opacity=".55"><title>{escape(_point_title(p))}</title></circle>')
    out.append("</g>")
    if front:
        path = " ".join(f'{fx(p["train_hours"]):.1f},{fy(p["price_total_usd"]):.1f}' for p in front)
        out.append(f'<polyline class="pareto-line" points="{path}" fill="none" stroke="#2457d6" '
                   f'stroke-width="2" stroke-dasharray="5 3"/>')
        out.append('<g class="pareto">')
        for p in front:
            out.append(f'<circle cx="{fx(p["train_hours"]):.1f}" cy="{fy(p["price_total_usd"]):.1f}" r="5.5" '
                       f'fill="#2457d6"><title>Pareto front: {escape(_point_title(p))}</title></circle>')
        out.append("</g>")
    out.append('<g class="plans">')
    for i, p in enumerate(marks):
        cx, cy = fx(p["train_hours"]), fy(p["price_total_usd"])
        out.append(f'<circle cx="{cx:.1f}" cy="{cy:.1f}" r="9" fill="none" stroke="#17202c" stroke-width="2">'
                   f'<title>{escape(plan_label(p, i + 1))}: {hours_compact(p["train_hours"])}, '
                   f'{usd_compact(p["price_total_usd"])}</title></circle>')
        dy = -13 if i % 2 == 0 else 22
        anchor = "end" if cx > width - 60 else "start"
        tx = cx - 10 if anchor == "end" else cx + 10
        out.append(f'<text x="{tx:.1f}" y="{cy + dy:.1f}" font-size="14" font-weight="700" '
                   f'text-anchor="{anchor}">#{i + 1}</text>')
    out.append("</g></svg>")
    return "".join(out)


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
