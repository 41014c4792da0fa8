"""The delivery task: thin, safe to deliver twice (a delivery is claimed before it is sent);
and the sweep (beat) that queues again deliveries whose message was lost."""

from celery import shared_task
from django.db import InterfaceError, OperationalError
from django.utils import timezone

from portal.core.retention import RETENTION_TASK_OPTIONS
from portal.webhooks.delivery import deliveries_overdue, delivery_attempt
from portal.webhooks.retention import webhooks_prune

DB_RETRY = {"autoretry_for": (OperationalError, InterfaceError), "retry_backoff": 1,
            "retry_backoff_max": 60, "retry_jitter": True}


@shared_task(bind=True, name="webhooks.deliver", acks_late=True, max_retries=None, **DB_RETRY)
def deliver_task(self, delivery_id: int) -> None:
    retry_in = delivery_attempt(delivery_id=delivery_id)
    if retry_in is not None:
        raise self.retry(countdown=retry_in)


@shared_task(name="webhooks.requeue_pending", **DB_RETRY)
def requeue_pending_task() -> int:
    ids = deliveries_overdue()
    for delivery_id in ids:
        deliver_task.delay(delivery_id)
    return len(ids)


@shared_task(name="webhooks.retention", **RETENTION_TASK_OPTIONS)
def retention_task() -> dict:
    """Beat: finished deliveries (and their attempts) and events past WEBHOOK_RETENTION_DAYS."""
    return dict(webhooks_prune(now=timezone.now()))
