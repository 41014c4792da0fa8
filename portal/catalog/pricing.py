"""The one money module (pure Python, Decimal only): what a server size costs per hour and per
month, reseller price lists, and the one billing rule, of a quoted job and of the metered ledger
alike (started hours, each calendar month capped at the monthly rate).

The configurator (``portal.quotes.pricing``, prices of catalog rows) and the recommender (prices
of ``CatalogData``) both price through ``server_price``, so a plan's ``price_hourly_usd`` is the
hourly price its quote shows; billing uses the same rule. Every line is rounded to the cent;
monthly options are turned into an hourly figure over ``HOURS_PER_MONTH``. Imports nothing of
Django: the pure recommender uses it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from decimal import ROUND_HALF_UP, Decimal
from functools import lru_cache

HOURS_PER_MONTH = Decimal("730")  # 365 × 24 / 12, rounded as hosting price lists do
CENT = Decimal("0.01")


@dataclass(frozen=True)
class PriceLine:
    label: str
    hourly: Decimal
    monthly: Decimal

    def to_dict(self) -> dict[str, str]:
        return {"label": self.label, "hourly": str(self.hourly), "monthly": str(self.monthly)}


@dataclass(frozen=True)
class Price:
    lines: tuple[PriceLine, ...]
    hourly: Decimal
    monthly: Decimal


@dataclass(frozen=True)
class Priced:
    """One priced item of a server size: a name and its catalog price."""

    label: str
    monthly: Decimal  # per unit
    hourly: Decimal | None = None  # per unit; None: monthly over HOURS_PER_MONTH
    quantity: int = 1  # units (terabytes of a bucket)
    key: str = ""  # what a price list names it by: sku:<slug>, nvme:, network:, storage:<slug>


def to_decimal(value) -> Decimal:
    """Exactly the price as written: 23.6 (a number read from JSON) is 23.60, not
    23.6000000000000014. For the edges where a price arrives as a number (the seed file, a test)."""
    return value if isinstance(value, Decimal) else Decimal(str(value))


MAX_MONEY = Decimal(10) ** 15  # USD: no price of a real server size comes near it


def money(value) -> Decimal:
    """To the cent; ValueError (with a message) for an amount that is not finite or out of range,
    which only absurd sizes reach (a bucket of 10**30 TB), rather than Decimal's InvalidOperation."""
    amount = to_decimal(value)
    if not amount.is_finite() or abs(amount) >= MAX_MONEY:
        raise ValueError(f"a price of {value:.3g} USD is out of range (at most {MAX_MONEY:.0e}); "
                         f"the sizes asked for are far beyond any server we sell")
    return amount.quantize(CENT, rounding=ROUND_HALF_UP)


def usd_json(amount: Decimal) -> float:
    """An amount as a JSON number, to the cent: JSON has no decimal type, and the cents read back
    exactly (to_decimal(123.45) is Decimal("123.45"))."""
    return float(money(amount))


MIN_PERCENT = Decimal("-90")  # a discount leaves at least a tenth of the list price
MAX_PERCENT = Decimal("500")


@dataclass(frozen=True)
class PriceList:
    """A reseller's markups (+) and discounts (−) in percent on the list prices: per item key
    (``sku:<slug>``, ``nvme:<slug>``, ``network:<slug>``, ``storage:<slug>``), else ``percent``.
    Each unit price is adjusted and rounded to the cent before it is multiplied, so the catalog
    shows exactly the unit prices a quote of the same organisation multiplies."""

    percent: Decimal = Decimal("0")
    items: tuple[tuple[str, Decimal], ...] = ()
    name: str = ""
    then: PriceList | None = None  # a reseller's markup on what this list charges (``resold``)

    def __post_init__(self) -> None:
        for key, value in (("percent", self.percent), *self.items):
            if not MIN_PERCENT <= to_decimal(value) <= MAX_PERCENT:
                raise ValueError(f"price list {self.name!r}: {key} must be between {MIN_PERCENT} "
                                 f"and {MAX_PERCENT} percent, got {value}")

    def percent_for(self, key: str) -> Decimal:
        return to_decimal(dict(self.items).get(key, self.percent))

    def unit(self, key: str, amount) -> Decimal:
        """One unit's price as this list charges it, to the cent."""
        price = money(to_decimal(amount) * (1 + self.percent_for(key) / 100))
        return price if self.then is None else self.then.unit(key, price)

    def options_of(self, server_key: str) -> PriceList:
        """This list as it prices a node's options (NVMe, network) on the server ``server_key``:
        a reseller's markup (``then``) takes that server's percent, because the node is metered
        and marked up as one line (``sold``)."""
        if self.then is None:
            return self
        return replace(self, then=replace(self.then, percent=self.then.percent_for(server_key)))


def resold(cost_list: PriceList | None, markup: PriceList | None) -> PriceList | None:
    """The unit prices a reseller's customer pays: ``markup`` on the reseller's cost (``cost_list``
    on the list price), each rounded to the cent as ``resale`` rounds them."""
    if markup is None:
        return cost_list
    return replace(cost_list or PriceList(name="list"), then=markup)


@dataclass(frozen=True)
class Resale:
    """One unit as a reseller buys and sells it, to the cent: ``cost`` is what the reseller pays
    (its price list on the list price), ``price`` what its customers pay (its resale markup on
    that cost)."""

    cost: Decimal
    price: Decimal

    @property
    def margin(self) -> Decimal:
        return self.price - self.cost

    @property
    def margin_percent(self) -> Decimal | None:
        """The margin as a share of the selling price, one decimal (None: a free unit)."""
        if not self.price:
            return None
        return (self.margin * 100 / self.price).quantize(Decimal("0.1"), rounding=ROUND_HALF_UP)


def resale(key: str, list_amount, *, cost_list: PriceList | None, markup: PriceList) -> Resale:
    """``list_amount`` (a list price of the item ``key``) as the reseller buys it and sells it:
    the cost is rounded to the cent first, and the markup applies to that cost, as a customer's
    usage is marked up from the rates the reseller is invoiced."""
    cost = money(list_amount) if cost_list is None else cost_list.unit(key, list_amount)
    return Resale(cost, markup.unit(key, cost))


def _times(nodes: int) -> str:
    return f" × {nodes} nodes" if nodes > 1 else ""


def _unit(item: Priced, amount, price_list: PriceList | None) -> Decimal:
    return to_decimal(amount) if price_list is None else price_list.unit(item.key, amount)


def _line(item: Priced, count: int, label: str, price_list: PriceList | None = None) -> PriceLine:
    count *= item.quantity
    monthly = money(_unit(item, item.monthly, price_list) * count)
    if item.hourly is None:
        return PriceLine(label, money(monthly / HOURS_PER_MONTH), monthly)
    return PriceLine(label, money(_unit(item, item.hourly, price_list) * count), monthly)


def server_price(*, nodes: int, server: Priced, per_node: tuple[Priced, ...] = (),
                 shared: tuple[Priced, ...] = (), price_list: PriceList | None = None) -> Price:
    """The server (its own hourly and monthly price) and each per-node option (NVMe, network)
    times ``nodes``; shared items (the storage bucket) once. ``price_list``: the paying
    organisation's markups and discounts on each unit price (None: list prices)."""
    lines = [_line(server, nodes, f"{server.label}{_times(nodes)}", price_list)]
    lines += [_line(item, nodes, f"{item.label}{_times(nodes)}", price_list) for item in per_node]
    lines += [_line(item, 1, item.label, price_list) for item in shared]
    return Price(lines=tuple(lines), hourly=sum((line.hourly for line in lines), Decimal("0.00")),
                 monthly=sum((line.monthly for line in lines), Decimal("0.00")))


def sold(price: Price, *, markup: PriceList, server_key: str, storage_key: str = "") -> Price:
    """``price`` (a server size at the reseller's cost) as the reseller's customer pays it, the way
    its usage is metered: the nodes (the server and its per-node options) at the server's markup
    on their total, the bucket (the last line, when ``storage_key`` names it) at its provider's.
    Lines follow the same markup and add up to those totals (the last node line takes the cent
    rounding may leave); cost lines that do not add up to ``price`` (an order repriced since its
    quote) are left out, as the totals are what is billed."""
    node_lines, shared = (price.lines[:-1], price.lines[-1]) if storage_key else (price.lines, None)
    storage_h, storage_m = (shared.hourly, shared.monthly) if shared else (ZERO, ZERO)
    nodes_h = markup.unit(server_key, price.hourly - storage_h)
    nodes_m = markup.unit(server_key, price.monthly - storage_m)
    lines = [PriceLine(line.label, markup.unit(server_key, line.hourly),
                       markup.unit(server_key, line.monthly)) for line in node_lines]
    if lines:
        last = lines[-1]
        lines[-1] = PriceLine(last.label, last.hourly + nodes_h - sum(line.hourly for line in lines),
                              last.monthly + nodes_m - sum(line.monthly for line in lines))
    if shared is not None:
        lines.append(PriceLine(shared.label, markup.unit(storage_key, storage_h),
                               markup.unit(storage_key, storage_m)))
    hourly = nodes_h + (lines[-1].hourly if shared else ZERO)
    monthly = nodes_m + (lines[-1].monthly if shared else ZERO)
    adds_up = (sum((line.hourly for line in price.lines), ZERO) == price.hourly
               and sum((line.monthly for line in price.lines), ZERO) == price.monthly)
    return Price(lines=tuple(lines) if adds_up else (), hourly=hourly, monthly=monthly)


# Billing of a training job (docs/sizing.md, "Priced as billed").
PROVISIONING_HOURS = 1.0  # reserve → handover (OS, stack, acceptance): the nodes are billed from reservation
MULTI_WEEK_HOURS = 14 * 24  # from two weeks on, a plan also shows its cost per month
ZERO = Decimal("0.00")


def billed_hours(train_hours: float, provisioning_hours: float = PROVISIONING_HOURS) -> int:
    """Every node is billed by the started hour over provisioning and training."""
    if not (math.isfinite(train_hours) and train_hours >= 0):
        raise ValueError(f"train_hours must be a finite number >= 0, got {train_hours!r}")
    return max(1, math.ceil(train_hours + provisioning_hours - 1e-9))


# A quote made before its hand-over is known lays its hours on the calendar from the first
# instant of a January (months of 31, 28, 31, 30 … days): a job of up to 744 h lies in one month.
QUOTE_START = datetime(2001, 1, 1, tzinfo=UTC)


def billed_total(hourly: Decimal, monthly: Decimal, hours: int, *,
                 start: datetime = QUOTE_START) -> tuple[Decimal, bool]:
    """The rule, the ledger's own (``metered_charges``): ``hours`` started hours from ``start``
    at the hourly rate, each calendar month (UTC) capped at the monthly rate (a size without a
    monthly rate: hourly). (total, capped in some month)."""
    return _summed(_quoted_months(hourly, monthly, hours, start))


@lru_cache(maxsize=4096)  # the recommender prices the same sizes for many job lengths
def _quoted_months(hourly: Decimal, monthly: Decimal, hours: int, start: datetime) -> tuple:
    if hours <= 0:
        return ()
    return tuple(metered_charges([Metered(start, start + timedelta(hours=hours),
                                          to_decimal(hourly), to_decimal(monthly))]))


def _summed(charges) -> tuple[Decimal, bool]:
    return sum((c.total for c in charges), Decimal(0)), any(c.by_month for c in charges)


@dataclass(frozen=True)
class JobPrice:
    """What a job costs as billed: every node by the started hour over provisioning and training,
    each calendar month capped at the monthly rate."""

    billed_hours: int
    hourly_total_usd: Decimal
    monthly_total_usd: Decimal  # the monthly rate × the calendar months the job touches (0: none)
    total_usd: Decimal
    billing: str  # hourly | monthly
    per_month_usd: Decimal | None  # multi-week jobs: the total spread over the months it runs


def billed_total_usd(hourly_usd: Decimal, monthly_usd: Decimal, train_hours: float,
                     provisioning_hours: float = PROVISIONING_HOURS) -> Decimal:
    """``job_price(...).total_usd`` without building the breakdown (the search calls it often)."""
    return billed_total(hourly_usd, monthly_usd, billed_hours(train_hours, provisioning_hours))[0]


def job_price(*, hourly_usd: Decimal, monthly_usd: Decimal, train_hours: float,
              provisioning_hours: float = PROVISIONING_HOURS,
              start: datetime = QUOTE_START) -> JobPrice:
    """``hourly_usd`` and ``monthly_usd`` are the whole server size's rates (``server_price``: all
    nodes); each node is billed the same started hours, so rounding the job's hours rounds each
    node's, and capping the size at its monthly rate caps each node at its share."""
    hours = billed_hours(train_hours, provisioning_hours)
    charges = _quoted_months(hourly_usd, monthly_usd, hours, start)
    total, by_month = _summed(charges)
    monthly_total = monthly_usd * len(charges) if monthly_usd > 0 else ZERO
    per_month = None
    if hours >= MULTI_WEEK_HOURS:  # the monthly rate when every month is capped, else spread
        every_month = bool(charges) and all(c.by_month for c in charges)
        per_month = monthly_usd if every_month else money(total * HOURS_PER_MONTH / hours)
    return JobPrice(hours, hourly_usd * hours, monthly_total, total,
                    "monthly" if by_month else "hourly", per_month)


# Metered billing (portal.billing): the same rule over measured time instead of a job's estimate.
@dataclass(frozen=True)
class Metered:
    """One stretch of measured use at one rate: ``start``/``end`` aware datetimes (UTC), the
    rates of the whole line (``hourly``, ``monthly``), a node's share of them as ``1/share``."""

    start: object  # datetime (kept untyped: this module imports nothing but the standard library)
    end: object
    hourly: Decimal
    monthly: Decimal
    share: int = 1


@dataclass(frozen=True)
class MonthCharge:
    month: tuple[int, int]  # (year, month), UTC
    units: int  # started billing units (hours at the default granularity)
    hourly_total: Decimal  # unrounded
    cap: Decimal | None  # the monthly rate this month's units are capped at (None: no monthly rate)
    total: Decimal  # unrounded; round per invoice line with ``money``
    by_month: bool


def _next_month(moment: datetime) -> datetime:
    """The first instant of the month after ``moment``'s (a UTC moment)."""
    if moment.month == 12:
        return datetime(moment.year + 1, 1, 1, tzinfo=UTC)
    return datetime(moment.year, moment.month + 1, 1, tzinfo=UTC)


def microseconds(delta) -> int:
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


def metered_charges(stretches: list[Metered], *, granularity_s: int = 3600,
                    measured_before_us: int = 0) -> list[MonthCharge]:
    """What one meter (a node of an order, or its bucket) costs per calendar month (UTC).

    The measured stretches are laid end to end (a pause, e.g. a failed node waiting for staff,
    is not billed) and cut into units of ``granularity_s`` from the first: each started unit is
    billed once, at the rate in force where it starts, in the month where it starts. So a price
    change mid-hour never bills that hour twice, and a month boundary mid-hour does not start
    an extra hour: N measured hours cost what ``billed_total`` quotes for N hours. Each month is
    then capped at the monthly rate (weighted by the units at each rate when the price changed
    within the month). A quote (``billed_total``) is this rule over one stretch of N hours.

    ``measured_before_us``: the meter's measured time before the first stretch given (its
    earlier months, summed), so that one month is priced without reading the meter's history."""
    unit = granularity_s * 1_000_000
    months: dict[tuple[int, int], list] = {}  # (year, month) → [{rate: units}, units]
    offset = measured_before_us  # measured microseconds before this stretch
    for s in sorted(stretches, key=_by_start) if len(stretches) > 1 else stretches:
        if s.end < s.start:
            raise ValueError(f"a usage stretch ends ({s.end}) before it starts ({s.start})")
        if s.start.utcoffset() or s.end.utcoffset():  # calendar months are UTC months
            raise ValueError(f"usage is measured in UTC, got {s.start.isoformat()}")
        rate = None
        cursor = s.start
        while cursor < s.end:
            piece_end = min(s.end, _next_month(cursor))
            a, b = offset, offset + microseconds(piece_end - cursor)
            units = -(-b // unit) - -(-a // unit)  # units whose start offset falls in [a, b)
            if units:
                rate = rate or (to_decimal(s.hourly) / s.share, to_decimal(s.monthly) / s.share)
                entry = months.setdefault((cursor.year, cursor.month), [{}, 0])
                entry[0][rate] = entry[0].get(rate, 0) + units
                entry[1] += units
            offset, cursor = b, piece_end
    return [_month_charge(month, *months[month], granularity_s) for month in sorted(months)]


def _by_start(stretch: Metered):
    return stretch.start


def _month_charge(month, rates: dict, units: int, granularity_s: int) -> MonthCharge:
    """A month's started units at their rates, capped at the monthly rate (weighted by the units
    at each rate; no cap when a rate has no monthly price)."""
    if len(rates) == 1:  # one rate all month: the common case, without the weighting
        [((hourly, monthly), _)] = rates.items()
        hourly_total = hourly * units if granularity_s == 3600 else hourly * units * granularity_s / 3600
        cap = monthly if monthly > 0 else None
    else:
        hourly_total = sum((hourly * n * granularity_s / 3600 for (hourly, _), n in rates.items()),
                           Decimal(0))
        cap = None
        if all(monthly > 0 for (_, monthly) in rates):
            cap = sum((monthly * n for (_, monthly), n in rates.items()), Decimal(0)) / units
    by_month = cap is not None and cap < hourly_total
    return MonthCharge(month, units, hourly_total, cap, cap if by_month else hourly_total, by_month)
