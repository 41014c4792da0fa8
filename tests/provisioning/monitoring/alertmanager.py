"""What Alertmanager would post: Prometheus's alerts (its /api/v1/alerts) in Alertmanager's
webhook format (version 4), firing while Prometheus lists them and resolved once it stops, as
``webhook_configs`` with ``send_resolved: true`` does. Prometheus itself only talks to an
Alertmanager; the test plays that part so no second daemon (and its group_wait) is needed."""

from __future__ import annotations

import hashlib
import json
from datetime import UTC, datetime


def fingerprint(labels: dict) -> str:
    return hashlib.sha256(json.dumps(labels, sort_keys=True).encode()).hexdigest()[:16]


def webhook_payload(alerts: list[dict], *, status: str) -> dict:
    """``alerts``: Prometheus's alert objects (labels, annotations, activeAt)."""
    now = datetime.now(UTC).isoformat().replace("+00:00", "Z")
    items = [{"status": status, "labels": a["labels"], "annotations": a.get("annotations", {}),
              "startsAt": a["activeAt"], "endsAt": now if status == "resolved" else "0001-01-01T00:00:00Z",
              "generatorURL": "", "fingerprint": fingerprint(a["labels"])} for a in alerts]
    return {"version": "4", "groupKey": "{}:{}", "truncatedAlerts": 0, "status": status,
            "receiver": "trainyard", "groupLabels": {}, "commonLabels": {},
            "commonAnnotations": {}, "externalURL": "http://alertmanager.test", "alerts": items}
