"""The delivery task: thin, safe to deliver twice (a delivery is claimed before it is sent);
and the sweep (beat) that queues again deliveries whose message was lost."""

from celery import shared_task
from django.db import InterfaceError, OperationalError

from portal.webhooks.delivery import deliveries_overdue, delivery_attempt

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
