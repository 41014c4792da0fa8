"""Writes on orders: place from a quote, submit, approve, reject, cancel, terminate.

Keyword-only, named <entity>_<action>. Every state change goes through ``order_transition``
(one table: ``portal.orders.states``) inside ``transaction.atomic()``; work for the workers is
queued on commit.
"""

from __future__ import annotations

from django.core.exceptions import PermissionDenied
from django.db import transaction
from django.utils import timezone

from portal.orders.models import Order, OrderEvent, Quote
from portal.orders.selectors import approval_decision
from portal.orders.states import (
    ORDER_FINAL,
    ORDER_TRANSITIONS,
    DomainError,
    OrderState,
    QuoteAlreadyOrdered,
)
from portal.orders.transitions import order_transition
from provisioning import allocation
from provisioning import services as provisioning_services
from provisioning.models import Node, ProvisioningRun
from provisioning.states import NodeState, RunKind, RunStatus


def _require_access(by, organisation_id: int) -> None:
    from portal.accounts.selectors import organisations_for

    if by is None or not organisations_for(by).filter(pk=organisation_id).exists():
        raise PermissionDenied("You cannot act on this organisation's orders.")


def _require_approver(by) -> None:
    if not getattr(by, "is_approver", False):
        raise PermissionDenied("Only staff approvers can approve or reject orders.")


@transaction.atomic
def order_place(*, quote: Quote, by, organisation=None) -> Order:
    """A draft order from ``quote``: its configuration, sizing plan and prices, frozen."""
    if organisation is not None and organisation.pk != quote.organisation_id:
        raise DomainError(f"Quote {quote.reference} belongs to another organisation.")
    try:
        _require_access(by, quote.organisation_id)
    except PermissionDenied:
        raise DomainError(f"Quote {quote.reference} belongs to another organisation.") from None
    if not quote.is_valid:
        raise DomainError(f"Quote {quote.reference} expired on {quote.valid_until:%Y-%m-%d}; "
                          f"make a new quote (prices and stock may have changed).")
    if not quote.sku.is_active:
        raise DomainError(f"{quote.sku.name} is no longer sold; make a new quote.")
    Quote.objects.select_for_update().filter(pk=quote.pk).first()  # serialise orders of one quote
    existing = Order.objects.filter(quote=quote).exclude(state__in=ORDER_FINAL).first()
    if existing is not None:
        raise QuoteAlreadyOrdered(existing)
    order = Order.objects.create(
        organisation_id=quote.organisation_id, placed_by=by if getattr(by, "pk", None) else None,
        quote=quote, sku=quote.sku, node_count=quote.node_count, nvme=quote.nvme,
        network=quote.network, storage_provider=quote.storage_provider,
        storage_tb=quote.storage_tb, strategy=quote.strategy, tracker=quote.tracker,
        plan=quote.plan, price_lines=quote.price_lines, price_hourly=quote.price_hourly,
        price_monthly=quote.price_monthly, currency=quote.currency, state=OrderState.DRAFT,
    )
    OrderEvent.objects.create(order=order, actor=by if getattr(by, "pk", None) else None,
                              transition="place", from_state=OrderState.DRAFT,
                              to_state=OrderState.DRAFT, note=f"placed from quote {quote.reference}")
    return order


def order_submit(*, order: Order, by) -> Order:
    """Draft → submitted → pending approval; approved at once where the SKU's policy allows it."""
    _require_access(by, order.organisation_id)
    with transaction.atomic():
        order_transition(order=order, name="submit", by=by)
        decision = approval_decision(order)
        order_transition(order=order, name="queue_for_approval", note=decision.reason)
        if decision.automatic:
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


def order_approve(*, order: Order, by, node_ids=None, note: str = "") -> Order:
    """Staff: approve, reserving ``node_ids`` or the suggested nodes; provisioning starts on commit.

    Raises TransitionNotAllowed when someone else decided first, OutOfStock when the nodes are
    gone; nothing is changed then.
    """
    _require_approver(by)
    with transaction.atomic():
        return _approve(order=order, by=by, node_ids=node_ids, note=note)


def _approve(*, order: Order, by, node_ids, note: str) -> Order:
    locked = Order.objects.select_for_update().select_related("sku").get(pk=order.pk)
    ORDER_TRANSITIONS.check("approve", locked.state, subject=f"order {locked.reference}")
    nodes = allocation.nodes_reserve(order=locked, by=by, node_ids=node_ids)
    hostnames = ", ".join(n.hostname for n in nodes)
    order_transition(order=order, name="approve", by=by,
                     note=(note + "; " if note else "") + f"nodes: {hostnames}",
                     approved_by=by if getattr(by, "pk", None) else None,
                     approved_at=timezone.now())
    run = provisioning_services.run_create(order=order, kind=RunKind.PROVISION, nodes=nodes, by=by)
    provisioning_services.enqueue_run_start(run)
    return order


def order_reject(*, order: Order, by, reason: str) -> Order:
    """Staff: reject with a reason the customer reads."""
    _require_approver(by)
    reason = (reason or "").strip()
    if not reason:
        raise DomainError("Give the customer a reason for the rejection.")
    return order_transition(order=order, name="reject", by=by, note=reason,
                            rejection_reason=reason)


def order_cancel(*, order: Order, by, reason: str = "") -> Order:
    """Customer or staff: cancel before provisioning starts; reserved nodes go back to stock."""
    _require_access(by, order.organisation_id)
    with transaction.atomic():
        order_transition(order=order, name="cancel", by=by, note=reason)
        for node in Node.objects.select_for_update().filter(order=order, state=NodeState.RESERVED):
            provisioning_services.node_transition(
                node=node, name="unreserve", by=by, event_order=order, order_id=None,
                reserved_until=None, note=f"order {order.reference} cancelled")
        ProvisioningRun.objects.filter(order=order, status=RunStatus.PENDING).update(
            status=RunStatus.CANCELLED, finished_at=timezone.now(), error="order cancelled")
    return order


def order_request_termination(*, order: Order, by, note: str = "") -> Order:
    """Customer or staff: shut the servers down; credentials are revoked and disks wiped."""
    _require_access(by, order.organisation_id)
    with transaction.atomic():
        order_transition(order=order, name="request_termination", by=by, note=note)
        provisioning_services.termination_start(order=order, by=by)
    order.refresh_from_db()
    return order
