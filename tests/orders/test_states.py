"""Every move in the order table works from each allowed state and is refused from every other."""

import pytest

from portal.core.states import TransitionNotAllowed
from portal.orders.models import Order
from portal.orders.states import ORDER_TRANSITIONS, OrderState
from portal.orders.transitions import order_transition
from tests.factories import make_order

ALLOWED = [(t.name, s) for t in ORDER_TRANSITIONS for s in sorted(t.sources)]
FORBIDDEN = {t.name: [s for s in OrderState.values if s not in t.sources] for t in ORDER_TRANSITIONS}


def test_the_table_covers_the_documented_states():
    reachable = {t.target for t in ORDER_TRANSITIONS} | {OrderState.DRAFT}
    assert reachable == set(OrderState.values)


@pytest.mark.parametrize(("name", "source"), ALLOWED)
def test_an_allowed_transition_moves_the_order_and_records_who_did_it(
        catalog, people, mailoutbox, name, source):
    order = make_order(people.acme, state=source, by=people.alice)
    order_transition(order=order, name=name, by=people.sam, note="because")
    target = ORDER_TRANSITIONS.get(name).target
    assert order.state == target
    assert Order.objects.get(pk=order.pk).state == target
    event = order.events.get(transition=name)
    assert (event.from_state, event.to_state, event.actor, event.note) == (
        source, target, people.sam, "because")


@pytest.mark.parametrize("name", FORBIDDEN)
def test_a_forbidden_transition_is_refused_from_every_other_state(catalog, people, name):
    order = make_order(people.acme)
    for source in FORBIDDEN[name]:
        Order.objects.filter(pk=order.pk).update(state=source)
        order.state = source
        with pytest.raises(TransitionNotAllowed) as exc:
            order_transition(order=order, name=name, by=people.sam)
        assert order.reference in str(exc.value)
        assert Order.objects.get(pk=order.pk).state == source
    assert not order.events.exists()


def test_target_state_shows_where_in_flight_work_goes(catalog, people):
    order = make_order(people.acme, state=OrderState.APPROVED)
    order_transition(order=order, name="start_provisioning")
    assert (order.state, order.target_state) == ("provisioning", "active")
    order_transition(order=order, name="verify")
    order_transition(order=order, name="activate")
    assert (order.state, order.target_state) == ("active", "")


def test_a_second_identical_move_says_it_already_happened(catalog, people):
    order = make_order(people.acme, state=OrderState.PENDING_APPROVAL)
    order_transition(order=order, name="approve", by=people.sam)
    with pytest.raises(TransitionNotAllowed, match="it is already approved"):
        order_transition(order=order, name="approve", by=people.sam)


def test_customer_visible_transitions_send_email(emails_inline, catalog, people, mailoutbox,
                                                 django_capture_on_commit_callbacks):
    order = make_order(people.acme, state=OrderState.PENDING_APPROVAL, by=people.alice)
    with django_capture_on_commit_callbacks(execute=True):
        order_transition(order=order, name="reject", by=people.sam, note="no fabric",
                         rejection_reason="No InfiniBand capacity until March.")
    assert len(mailoutbox) == 1
    mail = mailoutbox[0]
    assert mail.subject == f"[Trainyard] Order {order.reference}: Rejected"
    assert "No InfiniBand capacity until March." in mail.body
    assert mail.to == [people.alice.email]
