"""Webhook retention: deliveries that succeeded or were given up go with their attempts once
past WEBHOOK_RETENTION_DAYS, then events with no delivery left; a pending delivery (and so its
event) stays whatever its age."""

from datetime import UTC, datetime, timedelta

import pytest
from django.conf import settings

from portal.webhooks.models import WebhookAttempt, WebhookDelivery, WebhookEndpoint, WebhookEvent
from portal.webhooks.retention import webhooks_prune
from portal.webhooks.tasks import retention_task

NOW = datetime(2026, 3, 10, 12, 0, tzinfo=UTC)
WINDOW = timedelta(days=settings.WEBHOOK_RETENTION_DAYS)
pytestmark = pytest.mark.django_db


@pytest.fixture
def endpoint(people):
    return WebhookEndpoint.objects.create(organisation=people.reseller, url="https://hooks.example.com/t",
                                          secret="s")


def _delivery(endpoint, *, age: timedelta, state: str, attempts: int = 2) -> WebhookDelivery:
    at = NOW - age
    event = WebhookEvent.objects.create(organisation=endpoint.organisation, type="webhook.test",
                                        data={}, created_at=at)
    delivery = WebhookDelivery.objects.create(endpoint=endpoint, event=event, state=state,
                                              attempts=attempts, created_at=at)
    WebhookAttempt.objects.bulk_create(WebhookAttempt(delivery=delivery, number=n, at=at,
                                                      status_code=500) for n in range(1, attempts + 1))
    return delivery


def _exists(delivery) -> tuple[bool, bool, int]:
    return (WebhookDelivery.objects.filter(pk=delivery.pk).exists(),
            WebhookEvent.objects.filter(pk=delivery.event_id).exists(),
            WebhookAttempt.objects.filter(delivery_id=delivery.pk).count())


def test_finished_deliveries_past_the_window_go_with_attempts_and_events(endpoint):
    delivered = _delivery(endpoint, age=WINDOW + timedelta(minutes=1), state="succeeded")
    given_up = _delivery(endpoint, age=WINDOW + timedelta(days=40), state="failed", attempts=5)
    inside = _delivery(endpoint, age=WINDOW - timedelta(minutes=1), state="succeeded")
    pending = _delivery(endpoint, age=WINDOW + timedelta(days=90), state="pending")
    lonely = WebhookEvent.objects.create(organisation=endpoint.organisation, type="webhook.test",
                                         created_at=NOW - WINDOW - timedelta(minutes=1))
    fresh_lonely = WebhookEvent.objects.create(organisation=endpoint.organisation,
                                               type="webhook.test", created_at=NOW - timedelta(days=1))

    assert webhooks_prune(now=NOW) == {"webhooks.WebhookDelivery": 2, "webhooks.WebhookAttempt": 7,
                                       "webhooks.WebhookEvent": 3}
    assert _exists(delivered) == _exists(given_up) == (False, False, 0)
    assert _exists(inside) == (True, True, 2)
    assert _exists(pending) == (True, True, 2)
    assert not WebhookEvent.objects.filter(pk=lonely.pk).exists()
    assert WebhookEvent.objects.filter(pk=fresh_lonely.pk).exists()
    assert webhooks_prune(now=NOW) == {}


def test_an_event_stays_while_another_endpoints_delivery_of_it_is_pending(endpoint, people):
    other = WebhookEndpoint.objects.create(organisation=people.reseller,
                                           url="https://other.example.com/t", secret="s")
    done = _delivery(endpoint, age=WINDOW + timedelta(days=2), state="succeeded")
    WebhookDelivery.objects.create(endpoint=other, event=done.event, state="pending",
                                   created_at=done.created_at)
    assert webhooks_prune(now=NOW) == {"webhooks.WebhookDelivery": 1, "webhooks.WebhookAttempt": 2}
    assert WebhookEvent.objects.filter(pk=done.event_id).exists()


def test_batches_smaller_than_the_rows_delete_them_all(endpoint, settings):
    settings.RETENTION_BATCH_SIZE = 3
    for _ in range(7):
        _delivery(endpoint, age=WINDOW + timedelta(days=1), state="succeeded", attempts=1)
    assert webhooks_prune(now=NOW) == {"webhooks.WebhookDelivery": 7, "webhooks.WebhookAttempt": 7,
                                       "webhooks.WebhookEvent": 7}
    assert not WebhookDelivery.objects.exists()


def test_the_task_prunes_with_the_current_time(endpoint, settings):
    settings.WEBHOOK_RETENTION_DAYS = 0  # kept forever
    _delivery(endpoint, age=timedelta(days=5000), state="succeeded")
    assert retention_task.apply().get() == {}
    settings.WEBHOOK_RETENTION_DAYS = 30
    assert retention_task.apply().get() == {"webhooks.WebhookDelivery": 1,
                                            "webhooks.WebhookAttempt": 2, "webhooks.WebhookEvent": 1}
