"""Order transitions publish events to the endpoints that see the order: the customer's own and
its reseller's, subscribed and enabled; nobody else's, and nothing for a rolled-back move."""

import pytest
from django.db import transaction

from portal.orders.transitions import order_transition
from portal.webhooks.models import WebhookDelivery, WebhookEvent
from portal.webhooks.services import endpoint_create, endpoint_update
from tests.factories import make_order

pytestmark = pytest.mark.django_db


def _endpoint(org, **kwargs):
    return endpoint_create(organisation=org, url="https://hooks.example.com/in", **kwargs)[0]


def test_a_customer_order_moving_reaches_its_own_and_its_resellers_endpoints(people, catalog):
    reseller_hook, own_hook = _endpoint(people.reseller), _endpoint(people.client_org)
    outsider_hook = _endpoint(people.outsider_org)
    order = make_order(people.client_org)
    order_transition(order=order, name="submit")
    event = WebhookEvent.objects.get(type="order.state_changed")
    assert event.organisation == people.client_org
    assert event.data["order"]["reference"] == order.reference
    assert (event.data["from_state"], event.data["to_state"], event.data["text"]) == (
        "draft", "submitted", "Submitted")
    assert {d.endpoint for d in event.deliveries.all()} == {reseller_hook, own_hook}
    assert not WebhookDelivery.objects.filter(endpoint=outsider_hook).exists()


def test_activation_also_says_the_server_is_ready(people, catalog):
    hook = _endpoint(people.acme)
    order = make_order(people.acme, state="verifying")
    order_transition(order=order, name="activate")
    types = sorted(WebhookDelivery.objects.filter(endpoint=hook).values_list("event__type", flat=True))
    assert types == ["order.state_changed", "server.ready"]


def test_unsubscribed_and_disabled_endpoints_get_nothing(people, catalog):
    _endpoint(people.acme, event_types=["server.ready"])
    endpoint_update(endpoint=_endpoint(people.acme), enabled=False)
    order_transition(order=make_order(people.acme), name="submit")
    assert not WebhookEvent.objects.exists() and not WebhookDelivery.objects.exists()


def test_a_rolled_back_move_publishes_nothing(people, catalog):
    _endpoint(people.acme)
    order = make_order(people.acme)
    with pytest.raises(RuntimeError), transaction.atomic():
        order_transition(order=order, name="submit")
        raise RuntimeError("the caller failed after the move")
    assert not WebhookEvent.objects.exists()
