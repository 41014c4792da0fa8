"""An order's GPU charts: which nodes, which source, over which window (reads only)."""

from __future__ import annotations

from datetime import datetime, timedelta

from django.conf import settings
from django.utils import timezone

from provisioning.models import Node
from provisioning.monitoring.queries import METRICS, metric_for, range_for, step_for
from provisioning.monitoring.series import Chart
from provisioning.monitoring.sources import (
    NodeInfo,
    PrometheusSource,
    SimulatedSource,
    SourceError,
)
from provisioning.monitoring.targets import has_exporters

UNAVAILABLE = "GPU metrics are unavailable right now; the chart comes back when the store answers."
# A node with real GPUs on a portal without Prometheus: nothing is collected, and a generated
# series would be a lie about the customer's GPUs.
NOT_COLLECTED = "GPU metrics are not collected for this server yet."


def order_nodes(order) -> list[Node]:
    return list(Node.objects.filter(order=order).select_related("sku").order_by("hostname"))


def chart_window(order, range_key: str, now: datetime) -> tuple[datetime, datetime]:
    span = range_for(range_key).seconds
    if span is None:  # the order's life: since it was approved (nothing runs before)
        start = order.approved_at or order.created_at
        return min(start, now - timedelta(minutes=5)), now
    return now - timedelta(seconds=span), now


def order_chart(order, *, metric: str, range_key: str, now: datetime | None = None,
                nodes: list[Node] | None = None, store_down: bool = False) -> Chart:
    """One metric of ``order``'s nodes. ``metric`` and ``range_key`` must be keys of the
    allow-lists (ValueError otherwise); the query selects on the order's label only."""
    spec, window = metric_for(metric), range_for(range_key)
    now = now or timezone.now()
    start, end = chart_window(order, range_key, now)
    step_s = step_for((end - start).total_seconds())
    nodes = order_nodes(order) if nodes is None else nodes
    watched = [n for n in nodes if has_exporters(n)]
    simulated = [n for n in nodes if n not in watched]
    series, error = [], ""
    if watched and not settings.MONITORING_PROMETHEUS_URL:
        error = NOT_COLLECTED
    elif watched and store_down:
        error = UNAVAILABLE
    elif watched:
        source = PrometheusSource(settings.MONITORING_PROMETHEUS_URL,
                                  timeout_s=settings.MONITORING_QUERY_TIMEOUT_S)
        try:
            series += source.series(spec, order_reference=order.reference, start=start, end=end,
                                    step_s=step_s, nodes=[_info(n) for n in watched])
        except SourceError:
            error = UNAVAILABLE
    if simulated:
        series += SimulatedSource().series(spec, order_reference=order.reference, start=start,
                                           end=end, step_s=step_s,
                                           nodes=[_info(n) for n in simulated])
    return Chart(metric=spec.key, label=spec.label, unit=spec.unit, range=window.key,
                 range_label=window.label, start=start, end=end, step_s=step_s,
                 max_value=spec.max_value, series=tuple(series), simulated=bool(simulated),
                 error=error, nodes=tuple(n.hostname for n in nodes))


def order_charts(order, *, range_key: str, now: datetime | None = None) -> list[Chart]:
    """Every metric; once the store failed to answer, the rest are not asked (one timeout per
    page, not six)."""
    now, nodes, charts = now or timezone.now(), order_nodes(order), []
    for key in METRICS:
        charts.append(order_chart(order, metric=key, range_key=range_key, now=now, nodes=nodes,
                                  store_down=any(c.error for c in charts)))
    return charts


def busy_headline(chart: Chart) -> str:
    """"GPU busy 94 % over the last hour" from a utilisation chart ("" when it has no data)."""
    mean = chart.mean()
    if chart.metric != "gpu_util" or mean is None:
        return ""
    window = "the order's life" if chart.range == "life" else f"the last {chart.range_label}"
    window = window.replace("the last 1 hour", "the last hour")
    return f"GPU busy {mean:.0f} % over {window}"


def _info(node: Node) -> NodeInfo:
    return NodeInfo(hostname=node.hostname, gpus=node.sku.gpu_count)
