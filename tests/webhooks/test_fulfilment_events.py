"""Fulfilment's events: a failed acceptance test and a server whose GPU health turns bad reach the
order's endpoints (the simulated driver plays the hardware)."""

import pytest
from django.db import transaction

from portal.webhooks.models import WebhookEvent
from portal.webhooks.services import endpoint_create
from provisioning.monitoring.health import node_health_check
from tests.factories import H100_SKU, approved_order, drain, make_node, make_order

pytestmark = pytest.mark.django_db


def _endpoint(org):
    return endpoint_create(organisation=org, url="https://hooks.example.com/in")[0]


def test_a_failed_acceptance_test_is_published_with_the_failed_checks(catalog, people, sim_dir):
    hook = _endpoint(people.acme)
    make_node(sku=H100_SKU, state_dir=sim_dir, gpu_count=7, hostname="gpu-bad")
    order = approved_order(people)
    drain(order.runs.get().pk)
    event = WebhookEvent.objects.get(type="acceptance.failed")
    assert event.data["order"]["reference"] == order.reference
    assert (event.data["hostname"], event.data["failed_checks"]) == ("gpu-bad", ["GPUs visible (7 of 8)"])
    assert event.deliveries.get().endpoint == hook
    states = [e.data["to_state"] for e in WebhookEvent.objects.filter(type="order.state_changed")]
    assert states[-1] == "provision_failed" and not WebhookEvent.objects.filter(type="server.ready")


def test_health_degraded_is_published_once_when_a_server_turns_unhealthy(catalog, people, sim_dir):
    hook = _endpoint(people.acme)
    order = make_order(people.acme, state="active")
    node = make_node(sku=H100_SKU, state_dir=sim_dir, state="active", hostname="gpu-hot",
                     temperature_c=91)
    node.order = order
    node.save()
    with transaction.atomic():
        node_health_check(node=node)
        node_health_check(node=node)  # still bad: no second event
    [event] = WebhookEvent.objects.filter(type="health.degraded")
    assert event.data["hostname"] == "gpu-hot" and "GPU temperature" in event.data["problems"][0]
    assert event.deliveries.get().endpoint == hook
