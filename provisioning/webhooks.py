"""Webhook events raised by fulfilment: an acceptance test that failed, a server whose GPU health
turned bad. Published inside the transaction that records them (see portal.webhooks.publish)."""

from __future__ import annotations

from portal.orders.models import Order
from portal.orders.webhooks import order_summary
from portal.webhooks.events import EventType
from portal.webhooks.publish import event_publish
from provisioning.models import HealthCheck, Node


def acceptance_failed_publish(*, order: Order, hostname: str, failed_checks: list[str]) -> None:
    event_publish(organisation=order.organisation, type=EventType.ACCEPTANCE_FAILED,
                  data=lambda: {"order": order_summary(order), "hostname": hostname,
                                "failed_checks": failed_checks})


def health_degraded_publish(*, node: Node, check: HealthCheck) -> None:
    """Publishes when an order's node turns unhealthy (the first bad check after a good one)."""
    if check.ok or node.order_id is None:
        return
    previous = node.health_checks.exclude(pk=check.pk).order_by("-at", "-pk").first()
    if previous is not None and not previous.ok:
        return
    order = Order.objects.select_related("organisation", "sku").get(pk=node.order_id)
    event_publish(organisation=order.organisation, type=EventType.HEALTH_DEGRADED,
                  data=lambda: {"order": order_summary(order), "hostname": node.hostname,
                                "problems": list(check.problems)})
