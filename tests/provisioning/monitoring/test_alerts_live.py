"""An alert end to end through real daemons: the test exporter reports an XID on one GPU of
alice's node, the real Prometheus evaluates the shipped rule and fires, hands the alert to a real
Alertmanager (the repo's config), whose webhook posts it to the live portal: the node needs
attention, the operators are told, the alert is audited; once the rule stops firing Alertmanager
sends the resolved alert and the portal clears it."""

from __future__ import annotations

import pytest
from django.core import mail

from portal.accounts.tasks import staff_notify_task
from provisioning.models import NodeEvent
from provisioning.monitoring.alerts import alerted_node_ids
from provisioning.monitoring.models import NodeAlert

pytestmark = pytest.mark.django_db(transaction=True)


def _xid_alerts(prometheus, state: str) -> list[dict]:
    return [a for a in prometheus.api("/api/v1/alerts")["alerts"]
            if a["labels"]["alertname"] == "GpuXidError" and a["state"] == state]


def test_an_xid_fires_through_alertmanager_marks_the_node_and_clears(fleet, alerting, monkeypatch,
                                                                      people):
    prometheus, alertmanager = alerting
    monkeypatch.setattr(staff_notify_task, "delay", lambda *a: staff_notify_task(*a))
    prometheus.wait_for("alice's XID series", lambda: prometheus.api(
        "/api/v1/query", query='DCGM_FI_DEV_XID_ERRORS{node="gpu-alice-01"}')["result"])
    assert _xid_alerts(prometheus, "firing") == [] and not NodeAlert.objects.exists()
    fleet.alice_exporter.set("DCGM_FI_DEV_XID_ERRORS", 79, gpu=3)  # 79: GPU has fallen off the bus

    firing = prometheus.wait_for("GpuXidError firing", lambda: _xid_alerts(prometheus, "firing"))
    assert [(a["labels"]["node"], a["labels"]["gpu"]) for a in firing] == [("gpu-alice-01", "3")]
    assert firing[0]["labels"]["order"] == fleet.alice_order.reference
    alert = alertmanager.wait_for("the portal's open alert", lambda: NodeAlert.objects.first())
    [held] = [a for a in alertmanager.get("/api/v2/alerts") if a["labels"]["alertname"] == "GpuXidError"]
    assert alert.fingerprint == held["fingerprint"]  # Alertmanager's own fingerprint: it posted it
    assert (alert.node, alert.name, alert.resolved_at) == (fleet.alice_node, "GpuXidError", None)
    assert alert.summary == "gpu-alice-01: GPU 3 reported an XID error in the last 10 minutes"
    assert alerted_node_ids([fleet.alice_node.pk, fleet.charlie_node.pk]) == {fleet.alice_node.pk}
    [sent] = [m for m in mail.outbox if m.subject.startswith("[Trainyard staff]")]
    assert "gpu-alice-01 needs attention: GpuXidError" in sent.subject and people.olga.email in sent.to
    assert f"/ops/nodes/{fleet.alice_node.pk}/" in sent.body

    # No new XID: the rule's window passes, Prometheus resolves the alert, Alertmanager sends it
    # resolved (send_resolved) and the portal clears the node.
    alertmanager.wait_for("the resolved alert at the portal",
                          lambda: NodeAlert.objects.filter(resolved_at__isnull=False).exists(), timeout=90)
    assert not _xid_alerts(prometheus, "firing")
    assert NodeAlert.objects.count() == 1 and not alerted_node_ids([fleet.alice_node.pk])
    audit = NodeEvent.objects.filter(node=fleet.alice_node, transition__startswith="alert_")
    assert [(e.transition, e.note) for e in audit.order_by("pk")] == [
        ("alert_open", "GpuXidError: gpu-alice-01: GPU 3 reported an XID error in the last 10 minutes"),
        ("alert_resolve", "GpuXidError resolved")]
    assert len([m for m in mail.outbox if m.subject.startswith("[Trainyard staff]")]) == 1
