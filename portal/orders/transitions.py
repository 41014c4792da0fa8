"""Applies one move of the order state machine: lock the row, check the table, record who did it.

Used by the order services and by the provisioning pipeline. No I/O: e-mail goes out after the
commit (``transaction.on_commit``).
"""

from __future__ import annotations

from django.db import transaction
from django.utils import timezone

from portal.orders.models import Order, OrderEvent
from portal.orders.states import ORDER_TARGETS, ORDER_TRANSITIONS


def order_transition(*, order: Order, name: str, by=None, note: str = "", **fields) -> Order:
    """Moves ``order`` along transition ``name``; raises TransitionNotAllowed when the table says no.

    ``fields`` are saved with the move (e.g. ``rejection_reason``). The caller's instance is
    refreshed with the saved values.
    """
    with transaction.atomic():
        locked = Order.objects.select_for_update().get(pk=order.pk)
        transition = ORDER_TRANSITIONS.check(name, locked.state, subject=f"order {locked.reference}")
        from_state = locked.state
        locked.state = transition.target
        locked.target_state = ORDER_TARGETS.get(transition.target, "")
        locked.state_changed_at = timezone.now()
        for key, value in fields.items():
            setattr(locked, key, value)
        locked.save(update_fields=["state", "target_state", "state_changed_at", "updated_at",
                                   *fields])
        event = OrderEvent.objects.create(
            order=locked, actor=by if getattr(by, "pk", None) else None, transition=name,
            from_state=from_state, to_state=transition.target, note=note,
        )
        transaction.on_commit(lambda: _notify(event.pk))
    for attr in ("state", "target_state", "state_changed_at", "updated_at", *fields):
        setattr(order, attr, getattr(locked, attr))
    return order


def _notify(event_id: int) -> None:
    from portal.orders.notifications import order_event_notify

    order_event_notify(event_id=event_id)
