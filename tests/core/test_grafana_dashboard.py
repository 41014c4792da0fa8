"""The operators' Grafana dashboard (docs/grafana/trainyard.json) loads as a dashboard and charts
only metrics that exist: the portal's own and dcgm-exporter's."""

import json
import re
from pathlib import Path

from portal.core import metrics

DASHBOARD = Path(__file__).resolve().parents[2] / "docs/grafana/trainyard.json"
DCGM = {"DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_DEV_GPU_TEMP"}
PROMETHEUS_OWN = {"up", "ALERTS"}


def test_every_panel_queries_a_metric_that_exists():
    dashboard = json.loads(DASHBOARD.read_text())
    portal = {"trainyard_celery_queue_length"} | {
        m._name for m in (metrics.REQUEST_SECONDS, metrics.STEP_SECONDS, metrics.WEBHOOK_DELIVERIES,
                          metrics.PROVISIONING_FAILURES)}
    assert dashboard["uid"] and dashboard["panels"]
    for panel in dashboard["panels"]:
        [target] = panel["targets"]
        names = set(re.findall(r"\b(trainyard_[a-z_]+|DCGM_[A-Z_]+|up|ALERTS)\b", target["expr"]))
        names = {re.sub(r"_(bucket|count|sum|total)$", "", n) if n.startswith("trainyard_") else n
                 for n in names}
        assert names and names <= portal | DCGM | PROMETHEUS_OWN, (panel["title"], names)
