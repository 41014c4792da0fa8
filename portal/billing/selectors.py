"""Reads of the usage ledger: what an order, or an organisation, has cost in a calendar month
(UTC) so far, and the forecast to the month's end at the current run rate.

The forecast runs every open interval on to the month's end at its rate (the monthly cap
applies as it will on the invoice); closed intervals count as they are."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from datetime import UTC, datetime
from decimal import Decimal

from django.conf import settings
from django.db.models import Q
from django.utils import timezone

from portal.billing.models import UsageInterval
from portal.catalog.pricing import Metered, metered_charges, money

ZERO = Decimal("0.00")


@dataclass(frozen=True)
class MeterCost:
    order_id: int
    kind: str
    meter: int
    label: str
    units: int  # started billing units this month
    so_far: Decimal  # to the cent
    forecast: Decimal  # to the month's end at the current rate
    by_month: bool  # capped at the monthly rate
    running: bool


@dataclass
class OrderCost:
    order_id: int
    meters: list[MeterCost] = field(default_factory=list)

    @property
    def so_far(self) -> Decimal:
        return money(sum((m.so_far for m in self.meters), ZERO))

    @property
    def forecast(self) -> Decimal:
        return money(sum((m.forecast for m in self.meters), ZERO))

    @property
    def nodes(self) -> list[MeterCost]:
        return [m for m in self.meters if m.kind == UsageInterval.Kind.NODE]

    @property
    def storage(self) -> Decimal:
        return money(sum((m.so_far for m in self.meters if m.kind == UsageInterval.Kind.STORAGE), ZERO))


@dataclass(frozen=True)
class Period:
    start: datetime
    end: datetime  # exclusive: the next month's first instant

    @property
    def label(self) -> str:
        return f"{self.start:%B %Y}"


def month_of(moment: datetime) -> Period:
    moment = moment.astimezone(UTC)
    start = moment.replace(day=1, hour=0, minute=0, second=0, microsecond=0)
    end = (start.replace(year=start.year + 1, month=1) if start.month == 12
           else start.replace(month=start.month + 1))
    return Period(start, end)


def _month_total(rows, period: Period, until: datetime) -> tuple[Decimal, int, bool]:
    """One meter's charge for ``period``, its intervals cut at ``until``. The whole history of
    the meter is laid out (units run on across months), the period's month is read off."""
    stretches = [Metered(r.started_at.astimezone(UTC), min(r.ended_at or until, until).astimezone(UTC),
                         r.hourly, r.monthly, r.share)
                 for r in rows if r.started_at < until]
    stretches = [s for s in stretches if s.end > s.start]
    key = (period.start.year, period.start.month)
    for charge in metered_charges(stretches, granularity_s=settings.BILLING_GRANULARITY_S):
        if charge.month == key:
            return charge.total, charge.units, charge.by_month
    return Decimal(0), 0, False


def usage_costs(*, order_ids=None, organisation_id: int | None = None,
                at: datetime | None = None) -> list[OrderCost]:
    """Cost so far and forecast for the month of ``at`` (default now), per order and meter:
    the orders ``order_ids``, or every order of ``organisation_id`` with usage this month."""
    at = (at or timezone.now()).astimezone(UTC)
    period = month_of(at)
    live = Q(ended_at=None) | Q(ended_at__gt=period.start)
    meters_this_month = UsageInterval.objects.filter(live, started_at__lt=period.end)
    if order_ids is not None:
        meters_this_month = meters_this_month.filter(order_id__in=list(order_ids))
    if organisation_id is not None:
        meters_this_month = meters_this_month.filter(order__organisation_id=organisation_id)
    keys = set(meters_this_month.values_list("order_id", "kind", "meter"))
    if not keys:
        return []
    # A meter's earlier intervals decide where its units start (they run on across months).
    rows = (UsageInterval.objects.filter(order_id__in={k[0] for k in keys}, started_at__lt=period.end)
            .order_by("order_id", "kind", "meter", "started_at"))
    grouped = defaultdict(list)
    for row in rows:
        if (row.order_id, row.kind, row.meter) in keys:
            grouped[(row.order_id, row.kind, row.meter)].append(row)
    costs: dict[int, OrderCost] = {}
    for (order_id, kind, meter), meter_rows in sorted(grouped.items()):
        so_far, units, by_month = _month_total(meter_rows, period, at)
        forecast, _, _ = _month_total(meter_rows, period, period.end)
        running = meter_rows[-1].ended_at is None
        costs.setdefault(order_id, OrderCost(order_id)).meters.append(MeterCost(
            order_id, kind, meter, meter_rows[-1].label, units, money(so_far), money(forecast),
            by_month, running))
    return list(costs.values())


def order_cost(order, *, at: datetime | None = None) -> OrderCost:
    costs = usage_costs(order_ids=[order.pk], at=at)
    return costs[0] if costs else OrderCost(order.pk)
