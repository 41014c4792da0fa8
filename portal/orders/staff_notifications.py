"""What approvers hear of orders: an order that waits for approval, with the queue's link.
Queued after commit and sent by ``portal.accounts.staff_notifications`` (the roles, the
recipients, the task); the other staff e-mails live next to what they are about
(``provisioning.monitoring``, ``provisioning.pipeline.engine``).
"""

from __future__ import annotations

from portal.accounts.staff_notifications import APPROVERS, staff_notify_later
from portal.orders.states import OrderState


def order_moved_notify_staff(order, to_state: str, note: str = "") -> None:
    """Called by the order transition: the states staff must act on."""
    what = f"{order.reference}: {order.servers_label} for {order.organisation.name}"
    if to_state == OrderState.PENDING_APPROVAL:
        staff_notify_later(role=APPROVERS, subject=f"Order {order.reference} waits for approval",
                           lines=[f"New order {what} waits for approval."], path="/ops/approvals/")
