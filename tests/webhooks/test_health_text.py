"""A node whose driver cannot reach it: customers read that the server did not answer (server
page data over the API, the health.degraded webhook), never the driver's own words, which name
management addresses and BMC users; operators keep those in the check's raw output."""

import pytest
from django.db import transaction

from portal.webhooks.models import WebhookEvent
from portal.webhooks.services import endpoint_create
from provisioning.models import HealthCheck
from provisioning.monitoring.health import node_health_check
from provisioning.webhooks import UNREACHABLE_TEXT
from tests.api.conftest import key_client
from tests.factories import H100_SKU, make_node, make_order

pytestmark = pytest.mark.django_db
DRIVER_WORDS = "ipmitool: 10.9.0.14 user ADMIN: connection refused"


@pytest.fixture
def unreachable(catalog, people, sim_dir):
    endpoint_create(organisation=people.acme, url="https://hooks.example.com/in")
    order = make_order(people.acme, state="active")
    node = make_node(sku=H100_SKU, state_dir=sim_dir, state="active", hostname="gpu-gone",
                     fail={"health": {"permanent": DRIVER_WORDS}})
    node.order = order
    node.save()
    with transaction.atomic():
        node_health_check(node=node)
    return order


def test_the_webhook_and_the_api_say_it_did_not_answer_in_customer_words(unreachable, people):
    [event] = WebhookEvent.objects.filter(type="health.degraded")
    assert event.data["problems"] == [UNREACHABLE_TEXT]
    body = key_client(people.acme).get(f"/api/v1/orders/{unreachable.reference}/server").json()
    assert body["health"][0]["problems"] == [UNREACHABLE_TEXT]
    assert "10.9.0.14" not in str(event.data) and "10.9.0.14" not in str(body)
    assert DRIVER_WORDS in HealthCheck.objects.get().raw  # for operators


def test_a_check_stored_with_the_drivers_words_is_shown_in_customer_words(unreachable, people):
    HealthCheck.objects.update(problems=[f"health check failed: {DRIVER_WORDS}"])
    body = key_client(people.acme).get(f"/api/v1/orders/{unreachable.reference}/server").json()
    assert body["health"][0]["problems"] == [UNREACHABLE_TEXT]
