"""Approvals: the staff queue (fit, stock, suggested nodes) and the decisions on it.

Approving reserves nodes and creates the provisioning run, which starts after commit; an
automatic approval (the SKU's policy, ``portal.orders.selectors.approval_decision``) does the
same without staff. The staff pages are in ``provisioning.staff.views`` (``/ops/approvals/``).
"""

from __future__ import annotations

from dataclasses import dataclass

from django.db import transaction
from django.db.models import QuerySet
from django.utils import timezone

from portal.core.states import DomainError, actor_or_none
from portal.orders.models import Order, OrderEvent
from portal.orders.selectors import (
    ApprovalDecision,
    PlanFit,
    approval_decision,
    existing_customers,
    plan_fit,
)
from portal.orders.services import require_approver
from portal.orders.states import ORDER_TRANSITIONS, OrderState
from portal.orders.transitions import order_transition
from provisioning.inventory import allocation
from provisioning.pipeline.enqueue import enqueue_run_start
from provisioning.pipeline.runs import run_create
from provisioning.states import RunKind


@dataclass(frozen=True)
class ApprovalQueueItem:
    order: Order
    fit: PlanFit
    ready_nodes: int  # ready nodes of the SKU
    suggested: tuple  # Node rows approval would take
    stock_problem: str  # why nothing can be suggested ("Only 1 ready node …")
    decision: ApprovalDecision


QUEUE_PAGE_SIZE = 10


def approval_queue_orders() -> QuerySet[Order]:
    """Orders pending approval, oldest first (page it: ``approval_queue_items`` per page)."""
    return (Order.objects.filter(state=OrderState.PENDING_APPROVAL)
            .select_related("organisation", "sku__gpu", "nvme", "network", "storage_provider",
                            "strategy", "tracker", "placed_by")
            .order_by("state_changed_at", "pk"))


def approval_queue_items(orders) -> list[ApprovalQueueItem]:
    """Fit, stock, suggested nodes and policy of each of ``orders`` (a page of the queue), in a
    fixed number of queries whatever the number of orders and nodes."""
    orders = list(orders)
    picks = allocation.nodes_suggest_many(orders)
    existing = existing_customers({o.organisation_id for o in orders}) if orders else set()
    return [ApprovalQueueItem(
        order=order, fit=plan_fit(order), ready_nodes=picks[order.pk].ready_total,
        suggested=picks[order.pk].nodes, stock_problem=picks[order.pk].problem,
        decision=approval_decision(order, existing_customer=order.organisation_id in existing))
        for order in orders]


def order_approve(*, order: Order, by, node_ids=None, note: str = "") -> Order:
    """Staff: approve, reserving ``node_ids`` or the suggested nodes; provisioning starts on commit.

    Raises TransitionNotAllowed when someone else decided first, OutOfStock when the nodes are
    gone; nothing is changed then.
    """
    require_approver(by)
    with transaction.atomic():
        return _approve(order=order, by=by, node_ids=node_ids, note=note)


def order_approve_automatically(*, order: Order, decision: ApprovalDecision) -> Order:
    """The SKU's policy approved ``order``; without stock it stays in the queue for staff."""
    try:
        with transaction.atomic():
            _approve(order=order, by=None, node_ids=None,
                     note=f"approved automatically: {decision.reason}")
    except allocation.OutOfStock as exc:
        OrderEvent.objects.create(
            order=order, transition="auto_approval_skipped", from_state=order.state,
            to_state=order.state, note=f"automatic approval skipped: {exc}")
        order.refresh_from_db()
    return order


def _approve(*, order: Order, by, node_ids, note: str) -> Order:
    locked = Order.objects.select_for_update().select_related("sku").get(pk=order.pk)
    ORDER_TRANSITIONS.check("approve", locked.state, subject=f"order {locked.reference}")
    nodes = allocation.nodes_reserve(order=locked, by=by, node_ids=node_ids)
    hostnames = ", ".join(n.hostname for n in nodes)
    order_transition(order=order, name="approve", by=by,
                     note=(note + "; " if note else "") + f"nodes: {hostnames}",
                     approved_by=actor_or_none(by), approved_at=timezone.now())
    run = run_create(order=order, kind=RunKind.PROVISION, nodes=nodes, by=by)
    enqueue_run_start(run)
    return order


def order_reject(*, order: Order, by, reason: str, internal_note: str = "") -> Order:
    """Staff: reject with a reason the customer reads; ``internal_note`` stays with staff (the
    event's note, which only staff read)."""
    require_approver(by)
    reason = (reason or "").strip()
    if not reason:
        raise DomainError("Give the customer a reason for the rejection.")
    return order_transition(order=order, name="reject", by=by,
                            note=(internal_note or "").strip() or f"reason given: {reason}",
                            rejection_reason=reason)
