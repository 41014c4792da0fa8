"""Writes on orders: place from a quote, send for approval, and who may act on an order.

Keyword-only, named <entity>_<action>. Every state change goes through ``order_transition``
(one table: ``portal.orders.states``) inside ``transaction.atomic()``. What fulfilment does when
an order is approved, cancelled or terminated (nodes, runs) lives in ``provisioning``
(``approvals``, ``fulfilment``), which calls these and the order's transitions.
"""

from __future__ import annotations

from django.core.exceptions import PermissionDenied
from django.db import transaction

from portal.accounts.principals import api_key_of
from portal.accounts.selectors import organisations_for
from portal.core.addresses import url_problem
from portal.core.states import DomainError, actor_or_none
from portal.orders.models import Order, OrderEvent
from portal.orders.selectors import ApprovalDecision, approval_decision, quote_order
from portal.orders.states import OrderState, QuoteAlreadyOrdered
from portal.orders.transitions import order_transition
from portal.quotes.models import Quote


def require_order_access(by, organisation_id: int) -> None:
    """PermissionDenied unless ``by`` may act on the orders of ``organisation_id``."""
    if by is None or not organisations_for(by).filter(pk=organisation_id).exists():
        raise PermissionDenied("You cannot act on this organisation's orders.")


def require_approver(by) -> None:
    if not getattr(by, "is_approver", False):
        raise PermissionDenied("Only staff approvers can approve or reject orders.")


@transaction.atomic
def order_place(*, quote: Quote, by, organisation=None) -> Order:
    """A draft order from ``quote``: its configuration, sizing plan and prices, frozen."""
    if organisation is not None and organisation.pk != quote.organisation_id:
        raise DomainError(f"Quote {quote.reference} belongs to another organisation.")
    try:
        require_order_access(by, quote.organisation_id)
    except PermissionDenied:
        raise DomainError(f"Quote {quote.reference} belongs to another organisation.") from None
    if not quote.is_valid:
        raise DomainError(f"Quote {quote.reference} expired on {quote.valid_until:%Y-%m-%d}; "
                          f"make a new quote (prices and stock may have changed).")
    if not quote.sku.is_active:
        raise DomainError(f"{quote.sku.name} is no longer sold; make a new quote.")
    if quote.storage_endpoint_url and (problem := url_problem(quote.storage_endpoint_url)):
        raise DomainError(f"Quote {quote.reference}: your S3 endpoint is refused ({problem}) "
                          f"Make a new quote with another endpoint.")
    Quote.objects.select_for_update().filter(pk=quote.pk).first()  # serialise orders of one quote
    existing = quote_order(quote)
    if existing is not None:
        raise QuoteAlreadyOrdered(existing)
    order = Order.objects.create(
        organisation_id=quote.organisation_id, placed_by=actor_or_none(by),
        quote=quote, sku=quote.sku, node_count=quote.node_count, nvme=quote.nvme,
        network=quote.network, storage_provider=quote.storage_provider,
        storage_tb=quote.storage_tb, strategy=quote.strategy, tracker=quote.tracker,
        plan=quote.plan, price_lines=quote.price_lines, price_hourly=quote.price_hourly,
        price_monthly=quote.price_monthly, currency=quote.currency, state=OrderState.DRAFT,
        storage_retention_days=quote.storage_retention_days,
        storage_endpoint_url=quote.storage_endpoint_url, storage_bucket=quote.storage_bucket,
        storage_access_key_id=quote.storage_access_key_id,
        storage_secret_key=quote.storage_secret_key,
    )
    OrderEvent.objects.create(order=order, actor=actor_or_none(by), api_key=api_key_of(by),
                              transition="place", from_state=OrderState.DRAFT,
                              to_state=OrderState.DRAFT, note=f"placed from quote {quote.reference}")
    return order


def order_send_for_approval(*, order: Order, by) -> ApprovalDecision:
    """Draft → submitted → pending approval; returns what the SKU's approval policy says.

    Applying an automatic approval (reserving nodes) is fulfilment's:
    ``provisioning.fulfilment.orders.order_submit``."""
    require_order_access(by, order.organisation_id)
    with transaction.atomic():
        # One e-mail for both moves: the queued-for-approval one says the order was received.
        order_transition(order=order, name="submit", by=by, notify=False)
        decision = approval_decision(order)
        order_transition(order=order, name="queue_for_approval", note=decision.reason)
    return decision
