"""The order state machine: the one place that lists the allowed moves.

``ORDER_TRANSITIONS`` names each move, the states it may start from and where it goes.
Services apply a move with ``apply_transition`` inside ``transaction.atomic()`` on a row taken
with ``select_for_update``; nothing here does I/O.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.db import models


class DomainError(ValueError):
    """A business rule said no. The message is written for the person who asked."""


class TransitionNotAllowed(DomainError):
    pass


class QuoteAlreadyOrdered(DomainError):
    """A quote already has a live order (e.g. a double click on "Place order")."""

    def __init__(self, order):
        super().__init__(f"Quote {order.quote.reference} is already ordered as {order.reference}.")
        self.order = order


@dataclass(frozen=True)
class Transition:
    name: str
    sources: frozenset[str]
    target: str
    label: str  # what a person sees in the history, e.g. "Termination requested"

    @property
    def verb(self) -> str:
        return self.name.replace("_", " ")

    def allowed_from(self, state: str) -> bool:
        return state in self.sources


class TransitionTable:
    def __init__(self, entity: str, transitions: list[Transition], labels: dict[str, str]):
        self.entity = entity
        self.labels = labels
        self.by_name = {t.name: t for t in transitions}
        if len(self.by_name) != len(transitions):
            raise ValueError(f"{entity}: two transitions share a name")

    def __iter__(self):
        return iter(self.by_name.values())

    def get(self, name: str) -> Transition:
        try:
            return self.by_name[name]
        except KeyError:
            raise ValueError(f"{self.entity} has no transition {name!r}") from None

    def check(self, name: str, state: str, *, subject: str = "") -> Transition:
        """The transition, or TransitionNotAllowed with a message a person can read."""
        transition = self.get(name)
        if not transition.allowed_from(state):
            subject = subject or f"this {self.entity}"
            label = self.labels[state].lower()
            if state == transition.target:
                raise TransitionNotAllowed(f"Cannot {transition.verb} {subject}: it is already {label}.")
            allowed = " or ".join(self.labels[s].lower() for s in sorted(transition.sources))
            raise TransitionNotAllowed(
                f"Cannot {transition.verb} {subject}: it is {label} (only possible when {allowed})."
            )
        return transition

    def allowed_from(self, state: str) -> list[Transition]:
        return [t for t in self if t.allowed_from(state)]


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
    Transition("cancel", frozenset({S.DRAFT, S.SUBMITTED, S.PENDING_APPROVAL, S.APPROVED}),
               S.CANCELLED, "Cancelled"),
], labels=dict(OrderState.choices))

# States in which the order holds (or is about to hold) nodes.
ORDER_HOLDS_NODES = frozenset({S.APPROVED, S.PROVISIONING, S.VERIFYING, S.ACTIVE,
                               S.PROVISION_FAILED, S.TERMINATING})
ORDER_FINAL = frozenset({S.REJECTED, S.TERMINATED, S.CANCELLED})
# The state an in-flight order is heading for, shown beside its state.
ORDER_TARGETS = {S.SUBMITTED: S.PENDING_APPROVAL, S.APPROVED: S.ACTIVE, S.PROVISIONING: S.ACTIVE,
                 S.VERIFYING: S.ACTIVE, S.TERMINATING: S.TERMINATED}
