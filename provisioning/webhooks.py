"""Webhook events raised by fulfilment: an acceptance test that failed, a server whose GPU health
turned bad, a bucket kept after termination or deleted. Published inside the transaction that
records them (see portal.webhooks.publish)."""

from __future__ import annotations

from portal.orders.models import Order
from portal.orders.webhooks import order_summary
from portal.webhooks.events import EventType
from portal.webhooks.publish import event_publish
from provisioning.models import HealthCheck, Node
from provisioning.storage.states import BucketState

UNREACHABLE = "health check failed: "
# What customers read of an unreachable node (server page, API, health.degraded): never the
# driver's own words, which can name management addresses, BMC users or internal hosts.
# Operators get those in the check's ``raw`` and in their e-mail (provisioning.monitoring.health).
UNREACHABLE_TEXT = f"{UNREACHABLE}the server did not answer; our operators have been told"


# What a customer (and a reseller's webhook) reads when a termination stops: never the step's error.
TERMINATION_STALLED_TEXT = ("Termination stopped before the server was cleaned: your access is "
                            "already ended and your data stays where it was; our operators have "
                            "been told and finish it.")
TERMINATION_STALLED_OPEN_TEXT = ("Termination stopped before your access to the server could be "
                                 "ended; our operators have been told and end it by hand. Your "
                                 "data stays where it was.")


def customer_problems(problems: list[str]) -> list[str]:
    """A health check's problems as a customer may read them (also for checks stored before
    the driver's words were kept out of them)."""
    return [UNREACHABLE_TEXT if p.startswith(UNREACHABLE) else p for p in problems]


def acceptance_failed_publish(*, order: Order, hostname: str, failed_checks: list[str]) -> None:
    event_publish(organisation=order.organisation, type=EventType.ACCEPTANCE_FAILED,
                  data=lambda: {"order": order_summary(order), "hostname": hostname,
                                "failed_checks": failed_checks})


def termination_stalled_publish(*, order: Order, hostname: str, step: str,
                                access_ended: bool) -> None:
    """A termination stopped on a node; the node is out of stock and staff were told. What failed
    in detail is for staff only."""
    text = TERMINATION_STALLED_TEXT if access_ended else TERMINATION_STALLED_OPEN_TEXT
    event_publish(organisation=order.organisation, type=EventType.TERMINATION_STALLED,
                  data=lambda: {"order": order_summary(order), "hostname": hostname, "step": step,
                                "access_ended": access_ended, "text": text})


def health_degraded_publish(*, node: Node, check: HealthCheck, was_ok: bool | None) -> None:
    """Publishes when an order's node turns unhealthy (the first bad check after a good one, or
    the first check at all); ``was_ok`` is the node's health before ``check``."""
    if check.ok or node.order_id is None or was_ok is False:
        return
    order = Order.objects.select_related("organisation", "sku").get(pk=node.order_id)
    event_publish(organisation=order.organisation, type=EventType.HEALTH_DEGRADED,
                  data=lambda: {"order": order_summary(order), "hostname": node.hostname,
                                "problems": customer_problems(check.problems)})


def bucket_event_publish(*, bucket, transition: str) -> None:
    """storage.retained (kept until a date; also when staff move the date) and storage.deleted
    (its retention ended, or staff dropped it), from the bucket's transition."""
    if bucket.state == BucketState.RETAINED:
        kind = EventType.STORAGE_RETAINED
    elif bucket.state == BucketState.DELETED:
        kind = EventType.STORAGE_DELETED
    else:
        return
    order = Order.objects.select_related("organisation", "sku").get(pk=bucket.order_id)
    event_publish(organisation=order.organisation, type=kind, data=lambda: {
        "order": order_summary(order), "bucket": bucket.name, "endpoint": bucket.endpoint,
        "transition": transition, "state": bucket.state,
        "retain_until": bucket.retain_until.isoformat().replace("+00:00", "Z")
        if bucket.retain_until else None})
