"""Alerts in: Alertmanager's webhook payload (version 4) becomes open and resolved NodeAlert rows,
each change audited as a NodeEvent and, when an alert opens, e-mailed to the operators with a
link to the node page. A node "needs attention" while it has an open alert."""

from __future__ import annotations

import hashlib
import json
import logging
from dataclasses import dataclass
from datetime import datetime

from django.db import IntegrityError, transaction
from django.db.models import QuerySet
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from portal.accounts.staff_notifications import OPERATORS, staff_notify_later
from provisioning.models import Node, NodeEvent
from provisioning.monitoring.models import NodeAlert

logger = logging.getLogger(__name__)
MAX_ALERTS = 1000  # per payload; Alertmanager batches by group, far below this


class PayloadError(ValueError):
    """The body is not an Alertmanager webhook payload; the message says what is wrong."""


@dataclass(frozen=True)
class IncomingAlert:
    status: str  # firing | resolved
    name: str
    node: str
    fingerprint: str
    labels: dict
    summary: str
    started_at: datetime
    ended_at: datetime | None


@dataclass(frozen=True)
class AlertsResult:
    opened: int = 0
    resolved: int = 0
    ignored: int = 0  # no node label, an unknown node, or nothing to change


def parse_payload(body: bytes) -> list[IncomingAlert]:
    try:
        payload = json.loads(body)
    except (ValueError, UnicodeDecodeError) as exc:
        raise PayloadError(f"The body is not JSON: {exc}") from None
    alerts = payload.get("alerts") if isinstance(payload, dict) else None
    if not isinstance(alerts, list):
        raise PayloadError("Expected Alertmanager's webhook payload: an object with an 'alerts' list.")
    if len(alerts) > MAX_ALERTS:
        raise PayloadError(f"At most {MAX_ALERTS} alerts a request.")
    return [_alert(item, index) for index, item in enumerate(alerts)]


def _alert(item, index: int) -> IncomingAlert:
    where = f"alerts[{index}]"
    if not isinstance(item, dict):
        raise PayloadError(f"{where} is not an object.")
    status, labels = item.get("status"), item.get("labels")
    if status not in ("firing", "resolved"):
        raise PayloadError(f"{where}.status must be 'firing' or 'resolved'.")
    if not isinstance(labels, dict) or not all(isinstance(v, str) for v in labels.values()):
        raise PayloadError(f"{where}.labels must be an object of strings.")
    started = _time(item.get("startsAt"), f"{where}.startsAt", required=True)
    ended = _time(item.get("endsAt"), f"{where}.endsAt", required=False)
    annotations = item.get("annotations") if isinstance(item.get("annotations"), dict) else {}
    fingerprint = item.get("fingerprint")
    if not isinstance(fingerprint, str) or not fingerprint:
        fingerprint = hashlib.sha256(json.dumps(labels, sort_keys=True).encode()).hexdigest()[:16]
    return IncomingAlert(status=status, name=labels.get("alertname", "")[:120],
                         node=labels.get("node", ""), fingerprint=fingerprint[:64], labels=labels,
                         summary=str(annotations.get("summary", ""))[:2000], started_at=started,
                         ended_at=ended)


def _time(value, where: str, *, required: bool) -> datetime | None:
    parsed = parse_datetime(value) if isinstance(value, str) else None
    if parsed is None and required:
        raise PayloadError(f"{where} must be an RFC 3339 time.")
    # Alertmanager sends endsAt "0001-01-01T00:00:00Z" for an alert still firing.
    return parsed if parsed is None or parsed.year > 1 else None


def alerts_receive(alerts: list[IncomingAlert]) -> AlertsResult:
    opened = resolved = ignored = 0
    for alert in alerts:
        node = Node.objects.filter(hostname__iexact=alert.node).first() if alert.node else None
        if node is None:
            logger.warning("alert for no known node", extra={"alert": alert.name, "node": alert.node})
            ignored += 1
        elif alert.status == "firing" and _open(node, alert):
            opened += 1
        elif alert.status == "resolved" and _resolve(node, alert):
            resolved += 1
        else:
            ignored += 1
    return AlertsResult(opened=opened, resolved=resolved, ignored=ignored)


def _open(node: Node, alert: IncomingAlert) -> bool:
    """Opens the alert unless it is open already (Alertmanager repeats firing alerts)."""
    try:
        with transaction.atomic():
            if NodeAlert.objects.filter(fingerprint=alert.fingerprint, resolved_at=None).exists():
                return False
            NodeAlert.objects.create(node=node, name=alert.name, fingerprint=alert.fingerprint,
                                     severity=alert.labels.get("severity", "")[:20],
                                     summary=alert.summary, labels=alert.labels,
                                     started_at=alert.started_at)
            NodeEvent.objects.create(node=node, transition="alert_open", from_state=node.state,
                                     to_state=node.state, order=node.order,
                                     note=f"{alert.name}: {alert.summary}".rstrip(": "))
            serving = f", order {node.order.reference}" if node.order else ""
            staff_notify_later(
                role=OPERATORS, subject=f"Node {node.hostname} needs attention: {alert.name}",
                lines=[f"Prometheus raised {alert.name} on node {node.hostname} "
                       f"({node.get_state_display()}{serving}):", alert.summary or "(no summary)"],
                path=f"/ops/nodes/{node.pk}/")
    except IntegrityError:  # the same alert opened by a concurrent delivery
        return False
    return True


def _resolve(node: Node, alert: IncomingAlert) -> bool:
    with transaction.atomic():
        row = (NodeAlert.objects.select_for_update()
               .filter(fingerprint=alert.fingerprint, node=node, resolved_at=None).first())
        if row is None:
            return False
        row.resolved_at = alert.ended_at or timezone.now()
        row.save(update_fields=["resolved_at"])
        NodeEvent.objects.create(node=node, transition="alert_resolve", from_state=node.state,
                                 to_state=node.state, order=node.order,
                                 note=f"{row.name} resolved")
    return True


def open_alerts() -> QuerySet[NodeAlert]:
    return NodeAlert.objects.filter(resolved_at=None).select_related("node").order_by("-started_at", "-pk")


def alerted_node_ids(node_ids) -> set[int]:
    """Which of ``node_ids`` have an open alert (one query for a page of the inventory)."""
    return set(NodeAlert.objects.filter(resolved_at=None, node_id__in=list(node_ids))
               .values_list("node_id", flat=True))
