"""Retention of the webhook outbox (beat task ``webhooks.retention``; WEBHOOK_RETENTION_DAYS).

A delivery that succeeded or was given up goes, with its attempts (the delivery log resellers
read at ``/api/v1/webhooks/<ref>/deliveries``), once it is older than the window; a pending one
never does, whatever its age. An event goes once it is older than the window and no delivery of
it is left."""

from __future__ import annotations

from collections import Counter
from datetime import datetime

from django.conf import settings
from django.db.models import Exists, OuterRef

from portal.core.retention import delete_in_batches, retention_cutoff
from portal.webhooks.models import WebhookDelivery, WebhookEvent

FINISHED = (WebhookDelivery.State.SUCCEEDED, WebhookDelivery.State.FAILED)


def webhooks_prune(*, now: datetime, batch_size: int | None = None) -> Counter[str]:
    cutoff = retention_cutoff(settings.WEBHOOK_RETENTION_DAYS, now=now)
    if cutoff is None:
        return Counter()
    deleted = delete_in_batches(
        WebhookDelivery.objects.filter(state__in=FINISHED, created_at__lt=cutoff),
        batch_size=batch_size)
    undelivered = ~Exists(WebhookDelivery.objects.filter(event=OuterRef("pk")))
    return deleted + delete_in_batches(WebhookEvent.objects.filter(undelivered, created_at__lt=cutoff),
                                       batch_size=batch_size)
