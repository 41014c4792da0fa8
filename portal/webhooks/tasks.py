"""The delivery task: thin, safe to deliver twice (a delivery is claimed before it is sent)."""

from celery import shared_task
from django.db import InterfaceError, OperationalError

from portal.webhooks.delivery import delivery_attempt


@shared_task(bind=True, name="webhooks.deliver", acks_late=True, max_retries=None,
             autoretry_for=(OperationalError, InterfaceError), retry_backoff=1,
             retry_backoff_max=60, retry_jitter=True)
def deliver_task(self, delivery_id: int) -> None:
    retry_in = delivery_attempt(delivery_id=delivery_id)
    if retry_in is not None:
        raise self.retry(countdown=retry_in)
