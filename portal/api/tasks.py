"""The API's periodic task: expired Idempotency-Key answers are deleted (they are encrypted, and
past 24 hours nothing replays them)."""

from celery import shared_task
from django.db import InterfaceError, OperationalError

from portal.api.idempotency import idempotency_keys_purge


@shared_task(name="api.idempotency_purge", autoretry_for=(OperationalError, InterfaceError),
             retry_backoff=1, retry_backoff_max=60, retry_jitter=True)
def idempotency_purge_task() -> int:
    return idempotency_keys_purge()
