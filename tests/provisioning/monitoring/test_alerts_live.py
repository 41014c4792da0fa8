"""An alert end to end: the test exporter reports an XID on one GPU of alice's node, the real
Prometheus evaluates the shipped rule and fires; its firing alert reaches the portal's receiver in
Alertmanager's webhook format; the node needs attention and the operators are told; once the rule
stops firing the resolved alert clears it."""

from __future__ import annotations

import pytest
import requests
from django.core import mail

from portal.orders.tasks import staff_notify_task
from provisioning.monitoring.alerts import nodes_needing_attention
from provisioning.monitoring.models import NodeAlert
from tests.provisioning.monitoring.alertmanager import webhook_payload
from tests.provisioning.monitoring.conftest import ALERT_TOKEN

pytestmark = pytest.mark.django_db(transaction=True)


def _xid_alerts(prometheus, state: str) -> list[dict]:
    return [a for a in prometheus.api("/api/v1/alerts")["alerts"]
            if a["labels"]["alertname"] == "GpuXidError" and a["state"] == state]


def test_an_xid_fires_marks_the_node_tells_operators_and_clears(fleet, prometheus, live_server,
                                                                 monkeypatch, people):
    monkeypatch.setattr(staff_notify_task, "delay", lambda *a: staff_notify_task(*a))
    prometheus.wait_for("alice's XID series", lambda: prometheus.api(
        "/api/v1/query", query='DCGM_FI_DEV_XID_ERRORS{node="gpu-alice-01"}')["result"])
    assert _xid_alerts(prometheus, "firing") == []
    fleet.alice_exporter.set("DCGM_FI_DEV_XID_ERRORS", 79, gpu=3)  # 79: GPU has fallen off the bus

    firing = prometheus.wait_for("GpuXidError firing", lambda: _xid_alerts(prometheus, "firing"))
    assert [(a["labels"]["node"], a["labels"]["gpu"]) for a in firing] == [("gpu-alice-01", "3")]
    assert firing[0]["labels"]["order"] == fleet.alice_order.reference
    url, auth = f"{live_server.url}/monitoring/alerts", {"Authorization": f"Bearer {ALERT_TOKEN}"}
    response = requests.post(url, json=webhook_payload(firing, status="firing"), headers=auth, timeout=10)
    assert response.json() == {"opened": 1, "resolved": 0, "ignored": 0}

    assert list(nodes_needing_attention()) == [fleet.alice_node]
    alert = NodeAlert.objects.get(resolved_at=None)
    assert alert.summary == "gpu-alice-01: GPU 3 reported an XID error in the last 10 minutes"
    [sent] = [m for m in mail.outbox if m.subject.startswith("[Trainyard staff]")]
    assert "gpu-alice-01 needs attention: GpuXidError" in sent.subject and people.olga.email in sent.to
    assert f"/ops/nodes/{fleet.alice_node.pk}/" in sent.body

    # No new XID: the rule's window passes, Prometheus stops firing, the resolved alert clears it.
    prometheus.wait_for("GpuXidError resolved", lambda: not _xid_alerts(prometheus, "firing")
                        and not _xid_alerts(prometheus, "pending"))
    response = requests.post(url, json=webhook_payload(firing, status="resolved"), headers=auth, timeout=10)
    assert response.json() == {"opened": 0, "resolved": 1, "ignored": 0}
    assert not nodes_needing_attention().exists()
    assert NodeAlert.objects.get().resolved_at is not None
