"""The one price function: what a server size costs per hour and per month (pure Python).

The configurator (``portal.quotes.pricing``, Decimal prices of catalog rows) and the
recommender (float prices of ``CatalogData``) both price through ``server_price``, so a plan's
``price_hourly_usd`` is the hourly price its quote shows. Every line is rounded to the cent;
monthly options are turned into an hourly figure over ``HOURS_PER_MONTH``.
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import ROUND_HALF_UP, Decimal

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
    monthly: Decimal | float | int  # per unit
    hourly: Decimal | float | int | None = None  # per unit; None: monthly over HOURS_PER_MONTH
    quantity: int = 1  # units (terabytes of a bucket)


def _decimal(value) -> Decimal:
    """Exactly the price as written: 23.6 (a float from JSON) is 23.60, not 23.6000000000000014."""
    return value if isinstance(value, Decimal) else Decimal(str(value))


def money(value) -> Decimal:
    return _decimal(value).quantize(CENT, rounding=ROUND_HALF_UP)


def _times(nodes: int) -> str:
    return f" × {nodes} nodes" if nodes > 1 else ""


def _line(item: Priced, count: int, label: str) -> PriceLine:
    count *= item.quantity
    monthly = money(_decimal(item.monthly) * count)
    if item.hourly is None:
        return PriceLine(label, money(monthly / HOURS_PER_MONTH), monthly)
    return PriceLine(label, money(_decimal(item.hourly) * count), monthly)


def server_price(*, nodes: int, server: Priced, per_node: tuple[Priced, ...] = (),
                 shared: tuple[Priced, ...] = ()) -> Price:
    """The server (its own hourly and monthly price) and each per-node option (NVMe, network)
    times ``nodes``; shared items (the storage bucket) once."""
    lines = [_line(server, nodes, f"{server.label}{_times(nodes)}")]
    lines += [_line(item, nodes, f"{item.label}{_times(nodes)}") for item in per_node]
    lines += [_line(item, 1, item.label) for item in shared]
    return Price(lines=tuple(lines), hourly=sum((line.hourly for line in lines), Decimal("0.00")),
                 monthly=sum((line.monthly for line in lines), Decimal("0.00")))
