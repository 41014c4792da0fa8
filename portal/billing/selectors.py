"""Reads of the usage ledger: what an order, or an organisation, has cost in a calendar month
(UTC) so far, and the forecast to the month's end at the current run rate.

The forecast runs every open interval on to the month's end at its rate (the monthly cap
applies as it will on the invoice); closed intervals count as they are."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import NamedTuple

from django.conf import settings
from django.db.models import Q
from django.utils import timezone

from portal.billing.models import UsageInterval
from portal.catalog.pricing import Metered, PriceList, job_price, metered_charges, microseconds, money
from portal.catalog.selectors import price_basis as price_basis
from portal.catalog.selectors import resale_markup_for
from portal.orders.models import Order
from portal.quotes.pricing import frozen_price, selling_price
from portal.quotes.pricing import meter_keys as quote_meter_keys

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
    def units(self) -> int:
        return sum(m.units for m in self.meters)

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


class _Row(NamedTuple):
    """What the cost of a meter needs of an interval (read as tuples: thousands per page)."""

    order_id: int
    kind: str
    meter: int
    label: str
    started_at: datetime
    ended_at: datetime | None
    hourly: Decimal
    monthly: Decimal
    share: int
    measured_before_us: int


def meter_keys(order_ids) -> dict[tuple[int, str], str]:
    """(order id, meter kind) → the key a resale markup names it by: a node bills its order's
    server (SKU), the bucket its storage provider (``portal.quotes.pricing.meter_keys``). One
    query; read it once per page and hand it to each read that marks up."""
    rows = Order.objects.filter(pk__in=list(order_ids)).values_list(
        "pk", "sku__slug", "storage_provider__slug", "storage_tb")
    keys = {}
    for pk, sku, storage, storage_tb in rows:
        node, bucket = quote_meter_keys(sku=sku, storage=storage, storage_tb=storage_tb)
        keys[(pk, UsageInterval.Kind.NODE)] = node
        keys[(pk, UsageInterval.Kind.STORAGE)] = bucket
    return keys


def _marked_up(rows, markup: PriceList | None, keys=None):
    """``rows`` (with order_id, kind, hourly, monthly) at ``markup``'s prices; as they are
    without one. ``keys``: ``meter_keys`` of their orders (read when not given)."""
    if markup is None:
        return list(rows)
    rows = list(rows)
    keys = keys if keys is not None else meter_keys({r.order_id for r in rows})
    return [r._replace(hourly=markup.unit(keys[(r.order_id, r.kind)], r.hourly),
                       monthly=markup.unit(keys[(r.order_id, r.kind)], r.monthly)) for r in rows]


def _measured_before(first: _Row, period: Period) -> int:
    """The meter's measured time before ``period``, from its first interval in the month (which
    may have begun in an earlier month)."""
    return first.measured_before_us + max(0, microseconds(period.start - first.started_at))


def _month_total(rows, period: Period, until: datetime, before_us: int) -> tuple[Decimal, int, bool]:
    """One meter's charge for ``period``: its intervals in the month, cut at ``until``, laid on
    after the ``before_us`` microseconds it was measured before the month (units run on across
    months)."""
    stretches = [Metered(max(r.started_at, period.start), min(r.ended_at or until, until),
                         r.hourly, r.monthly, r.share)
                 for r in rows if r.started_at < until]
    stretches = [s for s in stretches if s.end > s.start]
    for charge in metered_charges(stretches, granularity_s=settings.BILLING_GRANULARITY_S,
                                  measured_before_us=before_us):
        return charge.total, charge.units, charge.by_month  # the stretches lie in one month
    return Decimal(0), 0, False


def usage_costs(*, order_ids=None, organisation_id: int | None = None, organisation_ids=None,
                at: datetime | None = None, markup: PriceList | None = None,
                keys=None) -> list[OrderCost]:
    """Cost so far and forecast for the month of ``at`` (default now), per order and meter:
    the orders ``order_ids``, or every order of ``organisation_id`` (or of ``organisation_ids``)
    with usage this month; ``markup``: at a reseller's selling prices (``price_basis``), with
    ``keys`` (``meter_keys``) when the caller has read them. One query, whatever the history:
    the month's intervals (each carries its meter's measured time before it, which decides
    where its billing units start)."""
    at = (at or timezone.now()).astimezone(UTC)
    rows = _month_rows(at, order_ids=order_ids, organisation_id=organisation_id,
                       organisation_ids=organisation_ids)
    return _costs(_marked_up(rows, markup, keys), at)


def _month_rows(at: datetime, *, order_ids=None, organisation_id=None, organisation_ids=None) -> list[_Row]:
    period = month_of(at)
    in_month = UsageInterval.objects.filter(Q(ended_at=None) | Q(ended_at__gt=period.start),
                                            started_at__lt=period.end)
    if order_ids is not None:
        in_month = in_month.filter(order_id__in=list(order_ids))
    if organisation_id is not None:
        in_month = in_month.filter(order__organisation_id=organisation_id)
    if organisation_ids is not None:
        in_month = in_month.filter(order__organisation_id__in=list(organisation_ids))
    rows = in_month.order_by("order_id", "kind", "meter", "started_at").values_list(*_Row._fields)
    return list(map(_Row._make, rows))


def _costs(rows: list[_Row], at: datetime) -> list[OrderCost]:
    """The month of ``at`` per order and meter from its intervals ``rows`` (already priced)."""
    period = month_of(at)
    grouped = defaultdict(list)
    for row in rows:
        grouped[(row.order_id, row.kind, row.meter)].append(row)
    costs: dict[int, OrderCost] = {}
    for (order_id, kind, meter), meter_rows in sorted(grouped.items()):
        before = _measured_before(meter_rows[0], period)
        so_far, units, by_month = _month_total(meter_rows, period, at, before)
        running = meter_rows[-1].ended_at is None
        forecast = so_far  # the month's end adds nothing to a meter that stopped before ``at``
        if running or meter_rows[-1].ended_at > at:
            forecast, _, _ = _month_total(meter_rows, period, period.end, before)
        costs.setdefault(order_id, OrderCost(order_id)).meters.append(MeterCost(
            order_id, kind, meter, meter_rows[-1].label, units, money(so_far), money(forecast),
            by_month, running))
    return list(costs.values())


def order_cost(order, *, at: datetime | None = None, markup: PriceList | None = None,
               keys=None) -> OrderCost:
    costs = usage_costs(order_ids=[order.pk], at=at, markup=markup, keys=keys)
    return costs[0] if costs else OrderCost(order.pk)


def month_parse(text: str, *, now: datetime | None = None) -> Period:
    """``YYYY-MM`` (a past or the current month), ValueError with a message otherwise."""
    current = month_of(now or timezone.now())
    try:
        moment = datetime.strptime(text, "%Y-%m").replace(tzinfo=UTC)
    except ValueError:
        raise ValueError(f"{text!r} is not a month: write it as YYYY-MM, e.g. "
                         f"{current.start:%Y-%m}.") from None
    if moment > current.start:
        raise ValueError(f"{text} has not begun: usage is known up to {current.start:%Y-%m}.")
    return month_of(moment)


def as_of(period: Period, *, now: datetime | None = None) -> datetime:
    """The instant a month's usage is read at: now for the current month, its last instant
    (everything it billed) for a past one."""
    now = (now or timezone.now()).astimezone(UTC)
    return min(now, period.end - timedelta(microseconds=1))


@dataclass(frozen=True)
class OrderSummary:
    period: Period
    cost: OrderCost
    lifetime: Decimal  # every month since hand-over, to now
    estimate: Decimal | None  # the sizing wizard's price of the job (its plan's training hours)
    estimate_hours: int | None


def order_summary(order, *, at: datetime | None = None, markup: PriceList | None = None,
                  keys=None) -> OrderSummary:
    """This month's cost so far and forecast, the whole order's cost to now, and beside it the
    price the sizing wizard estimated for the job (when it was sized in the wizard); ``markup``:
    at a reseller's selling prices (``price_basis``), with the order's ``meter_keys`` when the
    caller has read them (else read once here)."""
    at = (at or timezone.now()).astimezone(UTC)
    if markup is not None and keys is None:
        keys = meter_keys([order.pk])
    rows = _marked_up(map(_Row._make, UsageInterval.objects.filter(
        order=order, started_at__lt=month_of(at).end).order_by("kind", "meter", "started_at")
        .values_list(*_Row._fields)), markup, keys)
    lifetime = Decimal(0)
    by_meter = defaultdict(list)
    for row in rows:
        by_meter[(row.kind, row.meter)].append(row)
    for meter_rows in by_meter.values():
        stretches = [Metered(r.started_at.astimezone(UTC), min(r.ended_at or at, at).astimezone(UTC),
                             r.hourly, r.monthly, r.share) for r in meter_rows]
        charges = metered_charges([s for s in stretches if s.end > s.start],
                                  granularity_s=settings.BILLING_GRANULARITY_S)
        lifetime += sum((money(c.total) for c in charges), Decimal(0))
    estimate = hours = None
    train_hours = (order.plan or {}).get("train_hours")
    if isinstance(train_hours, int | float) and train_hours >= 0:
        price = order_price(order, markup=markup, keys=keys)
        job = job_price(hourly_usd=price.hourly, monthly_usd=price.monthly,
                        train_hours=float(train_hours))
        estimate, hours = job.total_usd, job.billed_hours
    return OrderSummary(month_of(at), _order_cost_of(order, rows, at), money(lifetime),
                        estimate, hours)


def _order_cost_of(order, rows: list[_Row], at: datetime) -> OrderCost:
    """The month of ``at`` from the order's intervals ``rows`` (already priced, every one that
    began before the month's end), as ``order_cost`` reads it."""
    period = month_of(at)
    in_month = [r for r in rows if r.ended_at is None or r.ended_at > period.start]
    costs = _costs(in_month, at)
    return costs[0] if costs else OrderCost(order.pk)


@dataclass(frozen=True)
class OrderPrice:
    """An order's price as one viewer reads it: the frozen quote, or (``marked_up``) the
    reseller's selling price of it, as the viewer's usage is priced
    (``portal.quotes.pricing.selling_price``)."""

    hourly: Decimal
    monthly: Decimal
    lines: tuple
    marked_up: bool


def order_price(order, *, markup: PriceList | None = None, keys=None) -> OrderPrice:
    """``keys``: the order's ``meter_keys`` when the caller has read them."""
    if markup is None:
        return OrderPrice(order.price_hourly, order.price_monthly, tuple(order.price_lines or ()), False)
    keys = keys if keys is not None else meter_keys([order.pk])
    price = selling_price(frozen_price(order.price_hourly, order.price_monthly, order.price_lines),
                          markup, server_key=keys[(order.pk, UsageInterval.Kind.NODE)],
                          storage_key=keys[(order.pk, UsageInterval.Kind.STORAGE)])
    return OrderPrice(price.hourly, price.monthly, price.lines, True)


def marked_up_hourly(orders, *, markup: PriceList) -> None:
    """Sets ``marked_up_hourly`` on each of ``orders`` (a page of a list, with their price lines):
    its hourly price at ``markup``'s prices, as ``order_price`` gives it. One query."""
    keys = meter_keys([o.pk for o in orders])
    for order in orders:
        order.marked_up_hourly = order_price(order, markup=markup, keys=keys).hourly


@dataclass(frozen=True)
class OrganisationUsage:
    period: Period
    orders: list[tuple[object, OrderCost]]  # (order, its cost), most expensive first

    @property
    def so_far(self) -> Decimal:
        return money(sum((c.so_far for _, c in self.orders), ZERO))

    @property
    def forecast(self) -> Decimal:
        return money(sum((c.forecast for _, c in self.orders), ZERO))

    @property
    def storage(self) -> Decimal:
        return money(sum((c.storage for _, c in self.orders), ZERO))

    @property
    def servers(self) -> Decimal:
        return money(self.so_far - self.storage)


def organisation_usage(organisation, *, period: Period | None = None, now: datetime | None = None,
                       markup: PriceList | None = None) -> OrganisationUsage:
    """An organisation's month by order, node and storage (default: the current month);
    ``markup``: at a reseller's selling prices (``price_basis``)."""
    period = period or month_of(now or timezone.now())
    costs = usage_costs(organisation_id=organisation.pk, at=as_of(period, now=now), markup=markup)
    orders = (Order.objects.select_related("sku").only("reference", "state", "node_count", "sku__name")
              .in_bulk([c.order_id for c in costs]))
    return _usage_of(period, costs, orders)


def _usage_of(period: Period, costs: list[OrderCost], orders: dict) -> OrganisationUsage:
    rows = sorted(((orders[c.order_id], c) for c in costs), key=lambda pair: -pair[1].so_far)
    return OrganisationUsage(period, rows)


@dataclass(frozen=True)
class CustomerMonth:
    """A reseller's customer's month side by side: at the reseller's cost (what it is invoiced)
    and at the reseller's selling prices (what it re-bills)."""

    customer: object
    cost: OrganisationUsage
    price: OrganisationUsage

    @property
    def margin(self) -> Decimal:
        return money(self.price.so_far - self.cost.so_far)


def customer_months(customers, *, period: Period) -> list[CustomerMonth]:
    """Each customer's month at cost and at its reseller's selling prices, from one read of the
    customers' intervals (and one of their orders' keys), not two per customer."""
    customers = list(customers)
    at = as_of(period)
    rows = _month_rows(at, organisation_ids=[c.pk for c in customers])
    orders = (Order.objects.select_related("sku").only("reference", "state", "node_count", "sku__name",
                                                       "organisation_id")
              .in_bulk({r.order_id for r in rows}))
    keys = meter_keys(orders) if rows else {}
    by_customer = defaultdict(list)
    for row in rows:
        by_customer[orders[row.order_id].organisation_id].append(row)
    months = []
    for child in customers:
        mine = by_customer.get(child.pk, [])
        markup = resale_markup_for(child)
        months.append(CustomerMonth(child, _usage_of(period, _costs(mine, at), orders),
                                    _usage_of(period, _costs(_marked_up(mine, markup, keys), at), orders)))
    return months


def recent_months(current: Period, count: int = 12) -> list[Period]:
    """``current`` and the ``count - 1`` months before it, newest first."""
    months = [current]
    while len(months) < count:
        months.append(month_of(months[-1].start - timedelta(microseconds=1)))
    return months
