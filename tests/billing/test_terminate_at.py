"""A customer's "terminate at": set on the server page (audited), enforced by the beat through
fulfilment as a termination request (the hand-back keeps the checkpoints), billing stops then."""

from datetime import UTC, timedelta

import pytest
from django.utils import timezone

from portal.billing.models import TerminationDeadline, UsageInterval
from portal.billing.services import order_deadline_set
from portal.core.states import DomainError
from portal.orders.states import OrderState
from provisioning.fulfilment.orders import orders_terminate_due
from provisioning.fulfilment.tasks import terminate_due_task
from tests.factories import H100_SKU, approved_order, drain, make_node


@pytest.fixture
def active(catalog, people, sim_dir):
    make_node(sku=H100_SKU, state_dir=sim_dir)
    order = approved_order(people)
    drain(order.runs.get().pk)
    order.refresh_from_db()
    return order


def test_past_its_time_the_order_is_terminated_and_billing_stops(active, people):
    at = timezone.now() + timedelta(hours=3)
    order_deadline_set(order=active, terminate_at=at, by=people.alice)
    assert active.events.get(transition="terminate_at").actor == people.alice
    assert orders_terminate_due(now=at - timedelta(minutes=1)) == []
    assert orders_terminate_due(now=at) == [active.reference]
    active.refresh_from_db()
    assert active.state == OrderState.TERMINATING
    assert "termination time" in active.events.get(to_state=OrderState.TERMINATING).note
    run = active.runs.get(kind="terminate")
    assert "retain_data" in list(run.steps.values_list("step", flat=True))  # checkpoints kept
    assert not UsageInterval.objects.filter(order=active, ended_at=None).exists()
    assert orders_terminate_due(now=at + timedelta(minutes=1)) == []  # once


def test_the_beat_task_terminates_what_is_due(active, people):
    soon = timezone.now() + timedelta(minutes=10)
    order_deadline_set(order=active, terminate_at=soon, by=people.alice)
    TerminationDeadline.objects.filter(order=active).update(
        terminate_at=timezone.now() - timedelta(seconds=1))
    assert terminate_due_task() == 1


def test_bad_times_and_outsiders_are_refused(active, people):
    from django.core.exceptions import PermissionDenied

    with pytest.raises(DomainError, match="at least 5 minutes"):
        order_deadline_set(order=active, terminate_at=timezone.now(), by=people.alice)
    with pytest.raises(PermissionDenied):
        order_deadline_set(order=active, terminate_at=timezone.now() + timedelta(days=1),
                           by=people.charlie)
    assert order_deadline_set(order=active, terminate_at=None, by=people.alice) is None


def test_set_on_the_server_page(active, people, login):
    client = login(people.alice)
    when = (timezone.now() + timedelta(days=2)).astimezone(UTC).replace(second=0, microsecond=0)
    response = client.post(f"/orders/{active.reference}/server/terminate-at/",
                           {"terminate_at": f"{when:%Y-%m-%dT%H:%M}"}, follow=True)
    assert f"terminates automatically at {when:%Y-%m-%d %H:%M} UTC" in response.content.decode()
    assert TerminationDeadline.objects.get(order=active).terminate_at == when
    bad = client.post(f"/orders/{active.reference}/server/terminate-at/", {"terminate_at": "soon"},
                      follow=True)
    assert "Enter a valid date/time" in bad.content.decode()
    assert login(people.charlie).post(f"/orders/{active.reference}/server/terminate-at/",
                                      {"terminate_at": ""}).status_code == 404
