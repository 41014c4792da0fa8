"""Thin Celery tasks of the orders app."""

from __future__ import annotations

from celery import shared_task
from django.utils import timezone

from portal.core.retention import RETENTION_TASK_OPTIONS
from portal.orders.models import OrderEvent
from portal.orders.notifications import order_event_notify
from portal.orders.retention import quotes_prune


@shared_task(name="orders.order_event_notify", acks_late=True, autoretry_for=(OSError,),
             max_retries=5, retry_backoff=True)
def order_event_notify_task(event_id: int) -> int:
    """The customer's e-mail for one order event, sent once: the task claims the event first
    (a redelivered task finds it claimed), and a failed send gives the claim back for the retry
    (mail server blips, OSError, are retried with backoff)."""
    claimed = OrderEvent.objects.filter(pk=event_id, notified_at__isnull=True).update(
        notified_at=timezone.now())
    if not claimed:
        return 0
    try:
        return order_event_notify(event_id=event_id)
    except Exception:
        OrderEvent.objects.filter(pk=event_id).update(notified_at=None)
        raise


@shared_task(name="orders.retention", **RETENTION_TASK_OPTIONS)
def retention_task() -> dict:
    """Beat: quotes nobody ordered, expired longer than QUOTE_RETENTION_DAYS."""
    return dict(quotes_prune(now=timezone.now()))
