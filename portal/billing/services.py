"""Writes on the usage ledger. Called by fulfilment (``provisioning.fulfilment.metering``) inside the
transaction of the node or order move that causes them; never on a schedule.

A meter is one node of an order (``kind=node``, ``meter`` = the node's id) or the order's
bucket (``kind=storage``). ``usage_sync`` is told which meters are billable now and makes the
open intervals say so: it opens what should run and is not open, closes what runs and should
not. Calling it twice changes nothing.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from decimal import Decimal

from django.db import transaction
from django.utils import timezone

from portal.billing.models import TerminationDeadline, UsageInterval
from portal.catalog.pricing import microseconds, money
from portal.core.states import DomainError, actor_or_none
from portal.orders.models import Order, OrderEvent
from portal.orders.services import require_order_access
from portal.orders.states import OrderState

K = UsageInterval.Kind


@dataclass(frozen=True)
class Rates:
    """An order's rates split as billed: the nodes (server and per-node options, all nodes) and
    the bucket (its own line, billed per TB-month while it exists)."""

    nodes_hourly: Decimal
    nodes_monthly: Decimal
    storage_hourly: Decimal
    storage_monthly: Decimal


def order_rates(order: Order) -> Rates:
    """The order's frozen price split into nodes and storage. The storage line is the shared
    line ``server_price`` puts last when the order has a priced bucket."""
    storage_h = storage_m = Decimal("0.00")
    lines = order.price_lines or []
    if order.has_priced_storage and len(lines) > 1:
        storage_h, storage_m = Decimal(lines[-1]["hourly"]), Decimal(lines[-1]["monthly"])
    return Rates(order.price_hourly - storage_h, order.price_monthly - storage_m,
                 storage_h, storage_m)


def usage_sync(*, order: Order, nodes: dict[int, str], storage: bool,
               at: datetime | None = None, cause: str) -> None:
    """Makes the open intervals of ``order`` match what is billable now: ``nodes`` (id → name)
    and the bucket when ``storage``. ``cause`` names the move (shown to staff)."""
    at = at or timezone.now()
    rates = order_rates(order)
    want = {(K.NODE, node_id): label for node_id, label in nodes.items()}
    if storage and rates.storage_monthly > 0:
        want[(K.STORAGE, 0)] = f"Object storage {order.storage_tb} TB"
    with transaction.atomic():
        Order.objects.select_for_update().filter(pk=order.pk).first()  # one writer per order
        open_rows = {(row.kind, row.meter): row
                     for row in UsageInterval.objects.filter(order=order, ended_at=None)}
        for key, row in open_rows.items():
            if key not in want:
                _close(row, at, cause)
        for (kind, meter), label in want.items():
            if (kind, meter) not in open_rows:
                _open(order, kind, meter, label, at, cause, rates)


def _open(order, kind, meter, label, at, cause, rates: Rates) -> UsageInterval:
    if kind == K.NODE:
        hourly, monthly, share = rates.nodes_hourly, rates.nodes_monthly, order.node_count
    else:
        hourly, monthly, share = rates.storage_hourly, rates.storage_monthly, 1
    last = (UsageInterval.objects.filter(order=order, kind=kind, meter=meter, started_at__lt=at,
                                         ended_at__isnull=False)
            .order_by("-started_at").values_list("measured_before_us", "started_at", "ended_at").first())
    before = last[0] + microseconds(last[2] - last[1]) if last else 0
    return UsageInterval.objects.create(order=order, kind=kind, meter=meter, label=label[:100],
                                        started_at=at, hourly=hourly, monthly=monthly,
                                        share=share, opened_by=cause[:40], measured_before_us=before)


def measured_before_set(intervals) -> list:
    """Works out ``measured_before_us`` of ``intervals`` (whole meters: every interval of each) in
    memory, from their order, for rows written in bulk (the migration, the bench) rather than by
    ``usage_sync``; returns the rows it changed."""
    running: dict[tuple, int] = {}
    changed = []
    for row in sorted(intervals, key=lambda r: (r.order_id, r.kind, r.meter, r.started_at, r.pk or 0)):
        key = (row.order_id, row.kind, row.meter)
        before = running.get(key, 0)
        if row.measured_before_us != before:
            row.measured_before_us = before
            changed.append(row)
        running[key] = before + (microseconds(row.ended_at - row.started_at) if row.ended_at else 0)
    return changed


def _close(row: UsageInterval, at: datetime, cause: str) -> None:
    row.ended_at = max(at, row.started_at)
    row.closed_by = cause[:40]
    row.save(update_fields=["ended_at", "closed_by"])


def order_price_change(*, order: Order, hourly, monthly, by, note: str = "",
                       at: datetime | None = None) -> Order:
    """An operator reprices a running order (a negotiated rate, a catalog correction): from
    ``at`` its open intervals run at the new rates. Audited as an order event."""
    if not getattr(by, "is_operator", False):
        raise DomainError("Only operators can change the price of an order.")
    hourly, monthly = money(hourly), money(monthly)
    if hourly < 0 or monthly < 0:
        raise DomainError("A price cannot be negative.")
    at = at or timezone.now()
    with transaction.atomic():
        locked = Order.objects.select_for_update().get(pk=order.pk)
        old = order_rates(locked)
        locked.price_hourly = hourly + old.storage_hourly
        locked.price_monthly = monthly + old.storage_monthly
        locked.save(update_fields=["price_hourly", "price_monthly", "updated_at"])
        rates = order_rates(locked)
        for row in UsageInterval.objects.filter(order=locked, ended_at=None, kind=K.NODE):
            _close(row, at, "price change")
            _open(locked, row.kind, row.meter, row.label, at, "price change", rates)
        OrderEvent.objects.create(order=locked, actor=actor_or_none(by), transition="reprice",
                                  from_state=locked.state, to_state=locked.state,
                                  note=note or f"price from {old.nodes_hourly} to {hourly} USD/h, "
                                               f"{old.nodes_monthly} to {monthly} USD/month")
    order.refresh_from_db()
    return order


MIN_DEADLINE_AHEAD = timedelta(minutes=5)


def order_deadline_set(*, order: Order, terminate_at: datetime | None, by) -> TerminationDeadline | None:
    """The customer's "terminate at" for an active order (None: no deadline). Audited."""
    require_order_access(by, order.organisation_id)
    with transaction.atomic():
        locked = Order.objects.select_for_update().get(pk=order.pk)
        if terminate_at is None:
            TerminationDeadline.objects.filter(order=locked).delete()
            note, deadline = "automatic termination removed", None
        else:
            if locked.state != OrderState.ACTIVE:
                raise DomainError(f"Order {locked.reference} is {locked.get_state_display().lower()}; "
                                  f"a termination time is set on an active server.")
            if terminate_at < timezone.now() + MIN_DEADLINE_AHEAD:
                raise DomainError("Choose a time at least 5 minutes from now (UTC); to stop the "
                                  "server now, terminate it.")
            deadline, _ = TerminationDeadline.objects.update_or_create(
                order=locked, defaults={"terminate_at": terminate_at, "set_by": actor_or_none(by)})
            note = f"terminates automatically at {terminate_at.astimezone(UTC):%Y-%m-%d %H:%M} UTC"
        OrderEvent.objects.create(order=locked, actor=actor_or_none(by), transition="terminate_at",
                                  from_state=locked.state, to_state=locked.state, note=note)
    return deadline
