"""End to end through a real Celery worker: an order moves, the worker POSTs the signed event to
a real receiver on loopback, a receiver answering 500 is retried with backoff, the log shows it."""

import json
import time

import pytest
from django.db import transaction

from portal.orders.transitions import order_transition
from portal.webhooks.models import WebhookDelivery
from tests.factories import make_order
from tests.webhooks.receiver import receiver_verifies

pytestmark = [pytest.mark.celery_worker, pytest.mark.usefixtures("require_postgres")]


@pytest.fixture
def fast_webhook_retries(monkeypatch):
    """Read by the worker process at start: retries within the test."""
    monkeypatch.setenv("WEBHOOK_RETRY_BASE_S", "0.3")


def _wait_for(predicate, *, worker, what: str, timeout: float = 45):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}\n{worker.output()[-4000:]}")


def test_the_worker_delivers_a_signed_event_and_retries_a_failing_receiver(
        fast_webhook_retries, celery_worker_process, hook, httpserver, people, catalog):
    httpserver.expect_oneshot_request("/hook", method="POST").respond_with_data("down", status=500)
    httpserver.expect_oneshot_request("/hook", method="POST").respond_with_data("still down", status=502)
    httpserver.expect_request("/hook", method="POST").respond_with_data("ok")
    order = make_order(people.client_org)
    with transaction.atomic():
        order_transition(order=order, name="submit")
    delivery = WebhookDelivery.objects.get(endpoint=hook)

    _wait_for(lambda: WebhookDelivery.objects.get(pk=delivery.pk).state == "succeeded",
              worker=celery_worker_process, what="the delivery to succeed")
    log = list(delivery.log.values_list("number", "status_code", "error"))
    assert log == [(1, 500, "HTTP 500"), (2, 502, "HTTP 502"), (3, 200, "")]
    assert len(httpserver.log) == 3
    bodies = {request.get_data() for request, _ in httpserver.log}
    assert len(bodies) == 1  # the same event body on every attempt
    for request, _ in httpserver.log:
        assert receiver_verifies(hook.shown_secret, request.headers["Trainyard-Signature"],
                                 request.get_data())
    payload = json.loads(bodies.pop())
    assert payload["type"] == "order.state_changed"
    assert payload["data"]["order"]["reference"] == order.reference
    assert payload["data"]["to_state"] == "submitted"
