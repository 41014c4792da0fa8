"""The webhook events an order's transitions publish (inside the transition's transaction, so an
event exists exactly when the move committed; delivery runs after commit)."""

from __future__ import annotations

from portal.orders.models import Order, OrderEvent
from portal.orders.selectors import order_event_text
from portal.orders.states import OrderState
from portal.webhooks.events import EventType
from portal.webhooks.publish import event_publish


def order_summary(order: Order) -> dict:
    return {"reference": order.reference, "customer": order.organisation.slug,
            "state": order.state, "target_state": order.target_state,
            "sku": order.sku.slug, "node_count": order.node_count}


def order_event_publish(*, event: OrderEvent) -> None:
    order = event.order
    event_publish(organisation=order.organisation, type=EventType.ORDER_STATE_CHANGED,
                  data=lambda: {
                      "order": order_summary(order), "transition": event.transition,
                      "from_state": event.from_state, "to_state": event.to_state,
                      "text": order_event_text(event),
                      "at": event.at.isoformat().replace("+00:00", "Z")})
    if event.to_state == OrderState.ACTIVE:
        event_publish(organisation=order.organisation, type=EventType.SERVER_READY,
                      data=lambda: {"order": order_summary(order)})
