"""Alertmanager's webhook at the portal: authenticated, validated, an alert per node opened once
(audited, operators e-mailed with the node's link), closed when resolved."""

from __future__ import annotations

import json

import pytest
from django.core import mail

from portal.accounts.tasks import staff_notify_task
from provisioning.models import Node, NodeEvent
from provisioning.monitoring.alerts import alerted_node_ids
from provisioning.monitoring.models import NodeAlert
from tests.provisioning.monitoring.alertmanager import webhook_payload
from tests.provisioning.monitoring.conftest import ALERT_TOKEN

pytestmark = pytest.mark.django_db
XID = {"labels": {"alertname": "GpuXidError", "node": "gpu-alice-01", "gpu": "3",
                  "severity": "warning", "order": "O-1"},
       "annotations": {"summary": "gpu-alice-01: GPU 3 reported an XID error"},
       "activeAt": "2026-12-04T10:00:00Z"}


def _post(client, payload, token=ALERT_TOKEN):
    return client.post("/monitoring/alerts", data=json.dumps(payload), content_type="application/json",
                       HTTP_AUTHORIZATION=f"Bearer {token}")


@pytest.fixture
def node(fleet):
    return fleet.alice_node


def test_alerts_need_the_alert_token(client, monitoring_tokens, node):
    assert _post(client, webhook_payload([XID], status="firing"), token="wrong").status_code == 401
    # The scrape token is Prometheus's, not Alertmanager's.
    assert _post(client, webhook_payload([XID], status="firing"),
                 token=monitoring_tokens).status_code == 401
    assert not NodeAlert.objects.exists()


@pytest.mark.parametrize("body, message", [
    ("not json", "not JSON"),
    ({"alerts": "x"}, "an 'alerts' list"),
    ({"alerts": [{"status": "open", "labels": {}}]}, "alerts[0].status"),
    ({"alerts": [{"status": "firing", "labels": {"node": 1}, "startsAt": "2026-01-01T00:00:00Z"}]},
     "alerts[0].labels"),
    ({"alerts": [{"status": "firing", "labels": {}, "startsAt": "yesterday"}]}, "alerts[0].startsAt"),
])
def test_a_body_that_is_no_alertmanager_payload_is_refused_with_the_reason(client, monitoring_tokens,
                                                                          node, body, message):
    data = body if isinstance(body, str) else json.dumps(body)
    response = client.post("/monitoring/alerts", data=data, content_type="application/json",
                           HTTP_AUTHORIZATION=f"Bearer {ALERT_TOKEN}")
    assert response.status_code == 400 and message in response.json()["detail"]
    assert not NodeAlert.objects.exists()


def test_a_firing_alert_marks_the_node_once_and_tells_the_operators(
        client, monitoring_tokens, node, people, settings, monkeypatch,
        django_capture_on_commit_callbacks):
    settings.SITE_URL = "http://portal.example"
    monkeypatch.setattr(staff_notify_task, "delay", lambda *a: staff_notify_task(*a))
    with django_capture_on_commit_callbacks(execute=True):
        first = _post(client, webhook_payload([XID], status="firing"))
        again = _post(client, webhook_payload([XID], status="firing"))  # Alertmanager repeats
    assert first.json() == {"opened": 1, "resolved": 0, "ignored": 0}
    assert again.json() == {"opened": 0, "resolved": 0, "ignored": 1}
    alert = NodeAlert.objects.get()
    assert (alert.node, alert.name, alert.severity) == (node, "GpuXidError", "warning")
    assert alert.resolved_at is None
    assert alerted_node_ids([node.pk]) == {node.pk}
    event = NodeEvent.objects.get(node=node, transition="alert_open")
    assert event.note == "GpuXidError: gpu-alice-01: GPU 3 reported an XID error"
    [sent] = [m for m in mail.outbox if m.subject.startswith("[Trainyard staff]")]
    assert sent.to == [people.olga.email] and "GpuXidError" in sent.subject
    assert f"http://portal.example/ops/nodes/{node.pk}/" in sent.body


def test_a_resolved_alert_clears_the_node(client, monitoring_tokens, node):
    _post(client, webhook_payload([XID], status="firing"))
    response = _post(client, webhook_payload([XID], status="resolved"))
    assert response.json() == {"opened": 0, "resolved": 1, "ignored": 0}
    assert NodeAlert.objects.get().resolved_at is not None
    assert alerted_node_ids([node.pk]) == set()
    assert NodeEvent.objects.filter(node=node, transition="alert_resolve").count() == 1
    # The same alert firing later is a new alert.
    assert _post(client, webhook_payload([XID], status="firing")).json()["opened"] == 1


def test_an_alert_for_no_known_node_is_ignored(client, monitoring_tokens, node):
    other = {**XID, "labels": {**XID["labels"], "node": "gpu-nowhere"}}
    assert _post(client, webhook_payload([other], status="firing")).json()["ignored"] == 1
    assert not NodeAlert.objects.exists() and Node.objects.filter(pk=node.pk).exists()


def test_the_staff_home_and_node_page_show_the_open_alert(client, monitoring_tokens, node, login,
                                                         people):
    _post(client, webhook_payload([XID], status="firing"))
    operator = login(people.olga)
    home = operator.get("/").content.decode()
    assert "1 open" in home and "GpuXidError" in home and f"/ops/nodes/{node.pk}/" in home
    page = operator.get(f"/ops/nodes/{node.pk}/").content.decode()
    assert "Needs attention" in page and "GPU 3 reported an XID error" in page
    inventory = operator.get("/ops/nodes/").content.decode()
    assert inventory.count(">needs attention</span>") == 1  # alice's node, not charlie's
