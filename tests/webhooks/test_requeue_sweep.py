"""A pending delivery whose Celery message was lost (a broker restart) is queued again by the
beat sweep and reaches the receiver; one whose retry window closed meanwhile is given up; one
that is not due, or claimed by a worker, is left alone."""

import time
from datetime import timedelta

import pytest
from django.conf import settings
from django.utils import timezone

from portal.webhooks.delivery import LOST_AFTER, deliveries_overdue
from portal.webhooks.models import WebhookDelivery, WebhookEvent
from portal.webhooks.tasks import requeue_pending_task


def _lost(hook, **fields) -> WebhookDelivery:
    """A delivery row with no task message behind it (created without publishing)."""
    event = WebhookEvent.objects.create(organisation=hook.organisation, type="webhook.test", data={})
    delivery = WebhookDelivery.objects.create(endpoint=hook, event=event)
    WebhookDelivery.objects.filter(pk=delivery.pk).update(
        **({"next_attempt_at": timezone.now() - LOST_AFTER - timedelta(seconds=5)} | fields))
    return delivery


@pytest.mark.django_db
def test_it_picks_overdue_unclaimed_deliveries_and_gives_up_expired_ones(hook):
    now = timezone.now()
    overdue = _lost(hook)
    not_yet = _lost(hook, next_attempt_at=now)
    claimed = _lost(hook, claimed_until=now + timedelta(seconds=30))
    expired = _lost(hook, created_at=now - timedelta(seconds=settings.WEBHOOK_RETRY_WINDOW_S + 1))
    assert deliveries_overdue(now=now) == [overdue.pk]
    states = dict(WebhookDelivery.objects.values_list("pk", "state"))
    assert states[expired.pk] == "failed"
    assert {states[d.pk] for d in (overdue, not_yet, claimed)} == {"pending"}
    entry = settings.CELERY_BEAT_SCHEDULE["webhooks-requeue-pending"]
    assert entry["task"] == requeue_pending_task.name


@pytest.mark.celery_worker
@pytest.mark.usefixtures("require_postgres")
def test_the_sweep_queues_a_lost_delivery_and_the_worker_sends_it(celery_worker_process, hook, httpserver):
    httpserver.expect_request("/hook", method="POST").respond_with_data("ok")
    delivery = _lost(hook)
    assert requeue_pending_task.delay().id  # queued like beat does; the worker runs it
    deadline = time.monotonic() + 45
    while time.monotonic() < deadline and WebhookDelivery.objects.get(pk=delivery.pk).state == "pending":
        time.sleep(0.2)
    assert WebhookDelivery.objects.get(pk=delivery.pk).state == "succeeded", \
        celery_worker_process.output()[-3000:]
    assert len(httpserver.log) == 1
