"""The order state machine: the one place that lists the allowed moves.

``ORDER_TRANSITIONS`` names each move, the states it may start from and where it goes.
Services apply a move with ``portal.orders.transitions.order_transition`` (the audited
``portal.core.states.transition``); nothing here does I/O.
"""

from __future__ import annotations

from django.db import models

from portal.core.states import DomainError, Transition, TransitionTable


class QuoteAlreadyOrdered(DomainError):
    """A quote already has a live order (e.g. a double click on "Place order")."""

    def __init__(self, order):
        super().__init__(f"Quote {order.quote.reference} is already ordered as {order.reference} "
                         f"({order.get_state_display().lower()}); a quote is ordered once: "
                         f"configure the server again for a new quote.")
        self.order = order


class OrderState(models.TextChoices):
    DRAFT = "draft", "Draft"
    SUBMITTED = "submitted", "Submitted"
    PENDING_APPROVAL = "pending_approval", "Pending approval"
    APPROVED = "approved", "Approved"
    REJECTED = "rejected", "Rejected"
    PROVISIONING = "provisioning", "Provisioning"
    VERIFYING = "verifying", "Verifying"
    ACTIVE = "active", "Active"
    PROVISION_FAILED = "provision_failed", "Provisioning failed"
    TERMINATING = "terminating", "Terminating"
    TERMINATED = "terminated", "Terminated"
    CANCELLED = "cancelled", "Cancelled"


S = OrderState
ORDER_TRANSITIONS = TransitionTable("order", [
    Transition("submit", frozenset({S.DRAFT}), S.SUBMITTED, "Submitted"),
    Transition("queue_for_approval", frozenset({S.SUBMITTED}), S.PENDING_APPROVAL,
               "Queued for approval"),
    Transition("approve", frozenset({S.PENDING_APPROVAL}), S.APPROVED, "Approved"),
    Transition("reject", frozenset({S.PENDING_APPROVAL}), S.REJECTED, "Rejected"),
    # Nodes reserved at approval went back to stock because provisioning never started.
    Transition("expire_reservation", frozenset({S.APPROVED}), S.PENDING_APPROVAL,
               "Returned to the approval queue"),
    Transition("start_provisioning", frozenset({S.APPROVED}), S.PROVISIONING, "Provisioning started"),
    Transition("verify", frozenset({S.PROVISIONING}), S.VERIFYING, "Verification started"),
    Transition("activate", frozenset({S.VERIFYING}), S.ACTIVE, "Activated"),
    Transition("fail", frozenset({S.PROVISIONING, S.VERIFYING}), S.PROVISION_FAILED,
               "Provisioning failed"),
    Transition("retry", frozenset({S.PROVISION_FAILED}), S.PROVISIONING, "Provisioning retried"),
    Transition("request_termination", frozenset({S.ACTIVE, S.PROVISION_FAILED}),
               S.TERMINATING, "Termination requested"),
    Transition("finish_termination", frozenset({S.TERMINATING}), S.TERMINATED,
               "Terminated"),
    # From provision_failed too: the server never ran, so nothing is billed; fulfilment wipes
    # the nodes the failed run touched (``provisioning.fulfilment.orders.order_cancel``).
    Transition("cancel", frozenset({S.DRAFT, S.SUBMITTED, S.PENDING_APPROVAL, S.APPROVED,
                                    S.PROVISION_FAILED}), S.CANCELLED, "Cancelled"),
], labels=dict(OrderState.choices))

ORDER_FINAL = frozenset({S.REJECTED, S.TERMINATED, S.CANCELLED})
# A quote is ordered once (docs/api.md): an order in any other state uses it up for good, a
# terminated one too; one refused or cancelled before anything was built leaves it free.
QUOTE_FREEING_STATES = frozenset({S.REJECTED, S.CANCELLED})
# The state an in-flight order is heading for, shown beside its state.
ORDER_TARGETS = {S.SUBMITTED: S.PENDING_APPROVAL, S.APPROVED: S.ACTIVE, S.PROVISIONING: S.ACTIVE,
                 S.VERIFYING: S.ACTIVE, S.TERMINATING: S.TERMINATED}
