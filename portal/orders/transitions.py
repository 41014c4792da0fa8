"""Applies one move of the order state machine: lock the row, check the table, record who did it.

Used by the order services and by provisioning (approval, fulfilment, the pipeline). No I/O: the
customer's e-mail (a Celery task) and the webhook deliveries are queued after the commit.
"""

from __future__ import annotations

import logging

from django.db import transaction
from django.utils import timezone

from portal.accounts.principals import api_key_of
from portal.core.states import transition
from portal.orders.models import Order, OrderEvent
from portal.orders.staff_notifications import order_moved_notify_staff
from portal.orders.states import ORDER_TARGETS, ORDER_TRANSITIONS
from portal.orders.tasks import order_event_notify_task
from portal.orders.webhooks import order_event_publish

logger = logging.getLogger(__name__)


def order_event_notify_later(event_id: int) -> None:
    """Queues the customer's e-mail for an order event once the surrounding transaction commits
    (a broker outage is logged; the committed change stays)."""
    def send():
        try:
            order_event_notify_task.delay(event_id)
        except Exception:
            logger.exception("could not queue the order e-mail", extra={"event": event_id})
    transaction.on_commit(send)


def order_transition(*, order: Order, name: str, by=None, note: str = "", notify: bool = True,
                     **fields) -> Order:
    """Moves ``order`` along transition ``name``; raises TransitionNotAllowed when the table says no.

    ``fields`` are saved with the move (e.g. ``rejection_reason``). The caller's instance is
    refreshed with the saved values. ``notify=False``: no customer e-mail for this move (a move
    the next one in the same transaction speaks for, e.g. submitted → queued for approval).
    """
    target = ORDER_TRANSITIONS.get(name).target

    def record(locked, from_state, to_state, actor):
        return OrderEvent.objects.create(order=locked, actor=actor, api_key=api_key_of(by),
                                         transition=name, from_state=from_state,
                                         to_state=to_state, note=note)

    with transaction.atomic():
        order, event = transition(
            order, table=ORDER_TRANSITIONS, name=name, by=by, record=record,
            subject=f"order {order.reference}",
            fields={"target_state": ORDER_TARGETS.get(target, ""),
                    "state_changed_at": timezone.now(), **fields})
        order_event_publish(event=event)
        if notify:
            order_event_notify_later(event.pk)
        order_moved_notify_staff(order, event.to_state, note)  # approvers / operators, after commit
    return order
