"""The server page's GPU charts card as a page reads it: the range and node chosen, the
headline, one SVG per metric of the node (reads only; ``portal.orders.views`` renders it)."""

from __future__ import annotations

from provisioning.monitoring.queries import RANGES
from provisioning.monitoring.selectors import NOT_COLLECTED, busy_headline, order_charts
from provisioning.monitoring.svg import colour, node_chart_svg

DEFAULT_RANGE = "1h"
REFRESH_S = 60


def gpu_charts_context(order, *, range_key: str | None, node: str | None) -> dict:
    """The card's context; an unknown range or node falls back to the default (a page link)."""
    range_key = range_key if range_key in RANGES else DEFAULT_RANGE
    charts = order_charts(order, range_key=range_key)
    nodes = list(charts[0].nodes) if charts else []
    node = node if node in nodes else (nodes[0] if nodes else "")
    gpus = [s.gpu for s in charts[0].for_node(node)] if charts else []
    return {"gpu": {
        "range": range_key, "ranges": list(RANGES.values()), "nodes": nodes, "node": node,
        "headline": busy_headline(charts[0]) if charts else "",
        "simulated": any(c.simulated for c in charts),
        "error": next((c.error for c in charts if c.error), ""),
        # Real GPUs and no metrics store: the message alone, no empty charts to switch between.
        "collected": not charts or any(c.simulated or c.error != NOT_COLLECTED for c in charts),
        "legend": [(f"GPU {gpu}", colour(i)) for i, gpu in enumerate(gpus)],
        "charts": [{"label": c.label, "unit": c.unit,
                    "svg": node_chart_svg(c, node, chart_id=f"gpu-{c.metric}")} for c in charts],
        "refresh_s": REFRESH_S,
    }}
