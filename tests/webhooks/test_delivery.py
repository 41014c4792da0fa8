"""One delivery attempt against a real HTTP receiver on loopback: signed body, the log, backoff,
giving up after the retry window, disabling an endpoint that failed for 24 hours."""

import json
from datetime import timedelta

import pytest
from django.core import mail
from django.utils import timezone

from portal.webhooks.delivery import backoff_s, delivery_attempt
from portal.webhooks.models import WebhookDelivery, WebhookEndpoint
from portal.webhooks.publish import endpoint_test_send, event_publish
from tests.webhooks.receiver import receiver_verifies

pytestmark = pytest.mark.django_db


def test_a_delivery_is_signed_and_logged(hook, httpserver):
    httpserver.expect_oneshot_request("/hook", method="POST").respond_with_data("ok")
    delivery = endpoint_test_send(endpoint=hook)
    assert delivery_attempt(delivery_id=delivery.pk) is None
    request, _ = httpserver.log[0]
    body = request.get_data()
    assert receiver_verifies(hook.shown_secret, request.headers["Trainyard-Signature"], body)
    payload = json.loads(body)
    assert payload["type"] == request.headers["Trainyard-Event"] == "webhook.test"
    assert payload["id"] == delivery.event.reference and payload["organisation"] == "gpu-resale"
    delivery.refresh_from_db()
    assert (delivery.state, delivery.attempts) == (WebhookDelivery.State.SUCCEEDED, 1)
    [attempt] = delivery.log.all()
    assert attempt.status_code == 200 and attempt.error == ""


def test_a_failing_receiver_is_retried_later_and_the_log_says_why(hook, httpserver):
    httpserver.expect_request("/hook", method="POST").respond_with_data("boom", status=500)
    delivery = endpoint_test_send(endpoint=hook)
    retry_in = delivery_attempt(delivery_id=delivery.pk)
    assert retry_in is not None and retry_in > 0
    delivery.refresh_from_db()
    assert (delivery.state, delivery.attempts) == (WebhookDelivery.State.PENDING, 1)
    assert delivery.next_attempt_at > timezone.now()
    assert [(a.status_code, a.error) for a in delivery.log.all()] == [(500, "HTTP 500")]
    hook.refresh_from_db()
    assert hook.failing_since is not None and hook.enabled
    # Not due yet: a duplicate task message sends nothing.
    assert delivery_attempt(delivery_id=delivery.pk) is None
    assert len(httpserver.log) == 1


def test_a_receiver_that_does_not_answer_is_logged_as_an_error(hook, httpserver):
    hook.url = "http://127.0.0.1:9/hook"  # the discard port: nothing listens
    hook.save()
    delivery = endpoint_test_send(endpoint=hook)
    assert delivery_attempt(delivery_id=delivery.pk) is not None
    [attempt] = delivery.log.all()
    assert attempt.status_code is None and "ConnectionError" in attempt.error


def test_a_success_clears_the_failure_record(hook, httpserver):
    httpserver.expect_request("/hook", method="POST").respond_with_data("ok")
    WebhookEndpoint.objects.filter(pk=hook.pk).update(failing_since=timezone.now() - timedelta(hours=3))
    delivery_attempt(delivery_id=endpoint_test_send(endpoint=hook).pk)
    hook.refresh_from_db()
    assert hook.failing_since is None


def test_backoff_grows_exponentially_with_jitter_up_to_the_cap(settings):
    settings.WEBHOOK_RETRY_BASE_S, settings.WEBHOOK_RETRY_MAX_S = 30, 3600
    for attempts, full in [(1, 30), (2, 60), (5, 480), (12, 3600)]:
        assert full * 0.5 <= backoff_s(attempts) <= full


def test_a_delivery_gives_up_after_the_retry_window(hook, httpserver, settings):
    httpserver.expect_request("/hook", method="POST").respond_with_data("no", status=503)
    delivery = endpoint_test_send(endpoint=hook)
    WebhookDelivery.objects.filter(pk=delivery.pk).update(
        created_at=timezone.now() - timedelta(seconds=settings.WEBHOOK_RETRY_WINDOW_S - 1))
    assert delivery_attempt(delivery_id=delivery.pk) is None
    delivery.refresh_from_db()
    assert delivery.state == WebhookDelivery.State.FAILED and delivery.attempts == 1


def test_an_endpoint_failing_for_24_hours_is_disabled_and_its_admins_told(
        hook, httpserver, people, django_capture_on_commit_callbacks):
    httpserver.expect_request("/hook", method="POST").respond_with_data("no", status=500)
    waiting = event_publish(organisation=people.client_org, type="order.state_changed",
                            data={"x": 1}).deliveries.get()
    WebhookEndpoint.objects.filter(pk=hook.pk).update(failing_since=timezone.now() - timedelta(hours=24))
    delivery = endpoint_test_send(endpoint=hook)
    with django_capture_on_commit_callbacks(execute=True):
        assert delivery_attempt(delivery_id=delivery.pk) is None
    hook.refresh_from_db()
    assert not hook.enabled and "failed for 24 hours" in hook.disabled_reason
    delivery.refresh_from_db()
    waiting.refresh_from_db()
    assert delivery.state == waiting.state == WebhookDelivery.State.FAILED
    assert delivery_attempt(delivery_id=waiting.pk) is None and len(httpserver.log) == 1
    [message] = mail.outbox
    assert message.to == [people.rita.email] and hook.reference in message.subject
    assert hook.url in message.body and "enabled" in message.body
