"""Reads on orders: tenant-scoped lists, the approval queue, the approval policy."""

from __future__ import annotations

from dataclasses import dataclass

from django.db.models import QuerySet

from portal.accounts.selectors import organisations_for
from portal.catalog.models import NetworkOption, ServerSKU
from portal.orders.models import Order, OrderEvent
from portal.orders.states import OrderState


def orders_for(user) -> QuerySet[Order]:
    """Orders a user may see: members their organisation's, reseller admins also their
    customers', hosting staff all. Look single orders up in this queryset (outsiders: 404)."""
    return Order.objects.filter(organisation__in=organisations_for(user)).select_related(
        "organisation", "sku__gpu", "nvme", "network", "storage_provider", "strategy", "tracker",
        "placed_by")


def order_events(order: Order) -> QuerySet[OrderEvent]:
    return order.events.select_related("actor").order_by("at", "pk")


def organisation_is_existing_customer(organisation_id: int) -> bool:
    """An organisation with at least one order that reached active."""
    return OrderEvent.objects.filter(order__organisation_id=organisation_id,
                                     to_state=OrderState.ACTIVE).exists()


@dataclass(frozen=True)
class ApprovalDecision:
    automatic: bool
    reason: str


def approval_decision(order: Order) -> ApprovalDecision:
    """The SKU's approval policy applied to ``order``; multi-node and InfiniBand stay manual."""
    if order.sku.approval_policy != ServerSKU.ApprovalPolicy.AUTO_SMALL:
        return ApprovalDecision(False, f"{order.sku.name} orders are approved by staff.")
    if order.node_count > 1:
        return ApprovalDecision(False, "Multi-node orders are always approved by staff.")
    if order.network.kind == NetworkOption.Kind.INFINIBAND:
        return ApprovalDecision(False, "InfiniBand orders need a staff check of the fabric.")
    if not organisation_is_existing_customer(order.organisation_id):
        return ApprovalDecision(False, "A new customer's first order is approved by staff.")
    return ApprovalDecision(True, "single-node order of an existing customer "
                                  f"({order.sku.name}: automatic approval)")


@dataclass(frozen=True)
class PlanFit:
    fits: bool | None  # None: no sizing plan attached
    summary: str


def plan_fit(order: Order) -> PlanFit:
    """Whether the sizing plan the order came from fits the ordered configuration."""
    plan = order.plan or {}
    if not plan:
        return PlanFit(None, "No sizing plan attached.")
    problems = []
    if plan.get("sku") and plan["sku"] != order.sku.slug:
        problems.append(f"plan was sized for {plan.get('sku_name') or plan['sku']}")
    if plan.get("nodes") and int(plan["nodes"]) != order.node_count:
        problems.append(f"plan needs {plan['nodes']} node(s), order has {order.node_count}")
    headroom = plan.get("headroom_bytes")
    if headroom is not None and headroom < 0:
        problems.append(f"needs {-headroom / 1e9:.1f} GB more GPU memory per GPU")
    if problems:
        return PlanFit(False, "; ".join(problems))
    model = plan.get("model", "the model")
    if headroom is not None:
        return PlanFit(True, f"{model} fits with {headroom / 1e9:.1f} GB headroom per GPU.")
    return PlanFit(True, f"{model}: sized for this configuration.")


@dataclass(frozen=True)
class ApprovalQueueItem:
    order: Order
    fit: PlanFit
    ready_nodes: int  # ready nodes of the SKU
    suggested: tuple  # Node rows approval would take
    stock_problem: str  # why nothing can be suggested ("Only 1 ready node …")
    decision: ApprovalDecision


def approval_queue() -> list[ApprovalQueueItem]:
    """Orders pending approval, oldest first, with fit, stock and suggested nodes."""
    from provisioning.selectors import nodes_suggested_for

    orders = (Order.objects.filter(state=OrderState.PENDING_APPROVAL)
              .select_related("organisation", "sku__gpu", "nvme", "network", "storage_provider",
                              "strategy", "tracker", "placed_by")
              .order_by("state_changed_at", "pk"))
    items = []
    for order in orders:
        pick = nodes_suggested_for(order)
        items.append(ApprovalQueueItem(order=order, fit=plan_fit(order), ready_nodes=pick.ready_total,
                                       suggested=pick.nodes, stock_problem=pick.problem,
                                       decision=approval_decision(order)))
    return items
