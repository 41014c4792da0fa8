"""Reads on orders: tenant-scoped lists, the approval queue, the approval policy."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from django.db.models import Exists, OuterRef, QuerySet
from django.utils import timezone

from portal.accounts.models import Organisation
from portal.accounts.selectors import tenant_filter
from portal.catalog.models import NetworkOption, ServerSKU
from portal.orders.models import Order, OrderEvent
from portal.orders.states import ORDER_FINAL, ORDER_TRANSITIONS, QUOTE_FREEING_STATES, OrderState
from portal.quotes.fit import PlanFit, plan_fit_verdict
from portal.quotes.models import Quote
from portal.quotes.plans import UNREADABLE_PLAN, plan_readable
from portal.quotes.selectors import shown_prices

PLACE_LABEL = "Order placed"
# Audit events that are not moves of the state machine: what they read as in the history.
EVENT_LABELS = {"place": PLACE_LABEL, "reboot": "Reboot requested",
                "redeploy_stack": "Training stack re-deploy requested",
                "rotate_storage_key": "New bucket key requested",
                "sync_keys": "SSH keys updated on the servers"}


def orders_for(user) -> QuerySet[Order]:
    """Orders a user may see: members their organisation's, reseller admins also their
    customers', hosting staff all. Look single orders up in this queryset (outsiders: 404)."""
    return Order.objects.filter(tenant_filter(user)).select_related(
        "organisation", "sku__gpu", "nvme", "network", "storage_provider", "strategy", "tracker",
        "placed_by")


def quote_order(quote) -> Order | None:
    """The order that used ``quote`` up (live, or terminated), None while it can be ordered."""
    return (Order.objects.filter(quote=quote).exclude(state__in=QUOTE_FREEING_STATES)
            .order_by("-created_at").first())


def quotes_open(quotes):
    """Of ``quotes``, those still to be ordered: valid and not used up by an order (``quote_order``),
    an anti-join by each quote's orders."""
    used_up = Order.objects.filter(quote=OuterRef("pk")).exclude(state__in=QUOTE_FREEING_STATES)
    return quotes.filter(valid_until__gt=timezone.now()).exclude(Exists(used_up))


# What a list row shows: the joins it needs only (each more join costs the planner more than the
# rows cost to read), none of the encrypted or large columns.
LIST_ROW_UNUSED = ("storage_access_key_id", "storage_secret_key", "plan", "price_lines")


def order_rows_for(user) -> QuerySet[Order]:
    """``orders_for`` as a list reads it: organisation and server, nothing else."""
    return (Order.objects.filter(tenant_filter(user)).select_related("organisation", "sku__gpu")
            .defer(*LIST_ROW_UNUSED))


def customer_home(user, *, rows: int) -> dict:
    """The customer's start page: the newest orders still live and the newest open quotes (valid,
    not used up by an order), each read by an index range of the person's organisations."""
    quotes = quotes_open(Quote.objects.filter(tenant_filter(user)))
    quotes = quotes.select_related("sku", "storage_provider", "organisation").defer(
        *(f for f in LIST_ROW_UNUSED if f != "price_lines"))
    quotes = list(quotes.order_by("-created_at", "-pk")[:rows])
    shown_prices(user, quotes)
    return {"orders": list(order_rows_for(user).exclude(state__in=ORDER_FINAL)
                           .order_by("-created_at", "-pk")[:rows]),
            "quotes": quotes}


def order_events(order: Order) -> QuerySet[OrderEvent]:
    return order.events.select_related("actor").order_by("at", "pk")


def order_event_text(event: OrderEvent) -> str:
    """What happened, in words a customer may read: the transition's label (and, on rejection,
    the reason staff wrote for the customer; on cancellation, the reason given with it, which
    the cancel forms say the customer reads), never staff notes or the failure reason."""
    if event.transition not in ORDER_TRANSITIONS.by_name:
        return EVENT_LABELS.get(event.transition) or event.transition.replace("_", " ").capitalize()
    text = ORDER_TRANSITIONS.get(event.transition).label
    if event.to_state == OrderState.REJECTED and event.order.rejection_reason:
        text += f": {event.order.rejection_reason}"
    elif event.transition == "cancel" and event.note:
        text += f": {event.note}"
    return text


@dataclass(frozen=True)
class HistoryRow:
    """One line of an order's history as a page shows it; ``note`` is filled for staff only."""

    at: datetime
    text: str
    from_state: str
    to_state: str
    from_label: str
    to_label: str
    who: str
    note: str = ""

    @property
    def moved(self) -> bool:
        return self.from_state != self.to_state


STAFF_ACTOR = "Trainyard staff"


def order_history(order: Order, *, staff: bool, viewer=None) -> list[HistoryRow]:
    """The audit trail in customer words (``order_event_text``); staff also read each note.
    Customers see hosting staff as "Trainyard staff", not by login name; the viewer's own
    actions read "you"."""
    labels = dict(OrderState.choices)
    rows = []
    for event in order_events(order).select_related("order"):
        actor = event.actor
        if actor is None:
            who = "system"
        elif viewer is not None and actor.pk == getattr(viewer, "pk", None):
            who = "you"
        elif getattr(actor, "is_hosting_staff", False) and not staff:
            who = STAFF_ACTOR
        else:
            who = actor.get_username()
        rows.append(HistoryRow(
            at=event.at, text=order_event_text(event), from_state=event.from_state,
            to_state=event.to_state, from_label=labels.get(event.from_state, event.from_state),
            to_label=labels.get(event.to_state, event.to_state), who=who,
            note=event.note if staff else ""))
    return rows


def organisation_is_existing_customer(organisation_id: int) -> bool:
    """An organisation with at least one order that reached active."""
    return bool(existing_customers([organisation_id]))


def existing_customers(organisation_ids) -> set[int]:
    """Which of ``organisation_ids`` have an order that reached active, in one query."""
    reached = OrderEvent.objects.filter(order__organisation_id=OuterRef("pk"), to_state=OrderState.ACTIVE)
    return set(Organisation.objects.filter(pk__in=list(organisation_ids))
               .filter(Exists(reached)).values_list("pk", flat=True))


@dataclass(frozen=True)
class ApprovalDecision:
    automatic: bool
    reason: str


def approval_decision(order: Order, *, existing_customer: bool | None = None) -> ApprovalDecision:
    """The SKU's approval policy applied to ``order``; multi-node and InfiniBand stay manual.
    ``existing_customer``: whether its organisation is one, when the caller read it already."""
    if order.sku.approval_policy != ServerSKU.ApprovalPolicy.AUTO_SMALL:
        return ApprovalDecision(False, f"{order.sku.name} orders are approved by staff.")
    if order.node_count > 1:
        return ApprovalDecision(False, "Multi-node orders are always approved by staff.")
    if order.network.kind == NetworkOption.Kind.INFINIBAND:
        return ApprovalDecision(False, "InfiniBand orders need a staff check of the fabric.")
    if existing_customer is None:
        existing_customer = organisation_is_existing_customer(order.organisation_id)
    if not existing_customer:
        return ApprovalDecision(False, "A new customer's first order is approved by staff.")
    return ApprovalDecision(True, "single-node order of an existing customer "
                                  f"({order.sku.name}: automatic approval)")


def plan_fit(order: Order) -> PlanFit:
    """Whether the sizing plan the order came from fits the ordered configuration (the one
    verdict the configurator also gives: ``portal.quotes.fit``)."""
    if not order.plan:
        return PlanFit(None, "No sizing plan attached.")
    plan = plan_readable(order.plan)
    if plan is None:
        return PlanFit(None, UNREADABLE_PLAN)
    return plan_fit_verdict(plan, sku=order.sku, node_count=order.node_count)
