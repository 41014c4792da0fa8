"""Configurator rules and pricing: pure Python, no database access.

A `Configuration` holds catalog objects (anything with the attributes the catalog models
have: `price_hourly`, `price_monthly`, `speed_gbps`, …), so the same rules price a form,
an API request and a quote. Money is `Decimal`; per-month options are turned into an
hourly figure over `HOURS_PER_MONTH`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from decimal import ROUND_HALF_UP, Decimal
from typing import Any

HOURS_PER_MONTH = Decimal("730")
CENT = Decimal("0.01")
MIN_MULTI_NODE_ETHERNET_GBPS = 100
MAX_NODES = 32
MAX_STORAGE_TB = 1000

ERROR, WARNING, INFO = "error", "warning", "info"


@dataclass(frozen=True)
class Configuration:
    sku: Any
    nvme: Any
    network: Any
    node_count: int = 1
    storage_provider: Any = None
    storage_tb: int = 0
    strategy: Any = None
    tracker: Any = None


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
class Message:
    level: str  # error (blocks a quote), warning, info
    field: str  # the form field it is about
    text: str


@dataclass(frozen=True)
class Evaluation:
    price: Price
    messages: tuple[Message, ...] = field(default_factory=tuple)

    @property
    def errors(self) -> tuple[Message, ...]:
        return tuple(m for m in self.messages if m.level == ERROR)

    @property
    def ok(self) -> bool:
        return not self.errors

    def for_field(self, name: str) -> tuple[Message, ...]:
        return tuple(m for m in self.messages if m.field == name)


def _money(value: Decimal) -> Decimal:
    return Decimal(value).quantize(CENT, rounding=ROUND_HALF_UP)


def _monthly_line(label: str, monthly: Decimal) -> PriceLine:
    monthly = _money(monthly)
    return PriceLine(label, _money(monthly / HOURS_PER_MONTH), monthly)


def _times(n: int) -> str:
    return f" × {n} nodes" if n > 1 else ""


def price(config: Configuration) -> Price:
    """Price per hour and per month: SKU × nodes, NVMe and network per node, storage per TB."""
    n = config.node_count
    sku = config.sku
    lines = [PriceLine(f"{sku.name}{_times(n)}", _money(Decimal(sku.price_hourly) * n),
                       _money(Decimal(sku.price_monthly) * n))]
    lines.append(_monthly_line(f"NVMe {config.nvme.size_tb} TB, {_raid_label(config.nvme)}{_times(n)}",
                               Decimal(config.nvme.price_monthly) * n))
    if Decimal(config.network.price_monthly):
        lines.append(_monthly_line(f"{config.network.name}{_times(n)}",
                                   Decimal(config.network.price_monthly) * n))
    if config.storage_provider is not None and config.storage_tb:
        provider = config.storage_provider
        lines.append(_monthly_line(f"Object storage {config.storage_tb} TB ({provider.name})",
                                   Decimal(provider.price_per_tb_monthly) * config.storage_tb))
    return Price(lines=tuple(lines), hourly=sum((line.hourly for line in lines), Decimal("0.00")),
                 monthly=sum((line.monthly for line in lines), Decimal("0.00")))


def _raid_label(nvme) -> str:
    display = getattr(nvme, "get_raid_display", None)
    return display() if callable(display) else str(nvme.raid)


def check(config: Configuration, *, recommended_nvme_tb: float | None = None,
          stock: int | None = None) -> tuple[Message, ...]:
    """The rules, each with a message a customer can act on."""
    messages: list[Message] = []
    n, net = config.node_count, config.network
    if not 1 <= n <= MAX_NODES:
        messages.append(Message(ERROR, "node_count", f"Choose between 1 and {MAX_NODES} nodes."))
    is_ib = net.kind == "infiniband"
    if n > 1 and net.speed_gbps <= 1:
        messages.append(Message(
            ERROR, "network", f"{net.name} is for single-node orders only. For {n} nodes choose "
            "InfiniBand or 100 GbE so gradients are not stuck on the wire."))
    elif n > 1 and not is_ib and net.speed_gbps < MIN_MULTI_NODE_ETHERNET_GBPS:
        messages.append(Message(
            ERROR, "network", f"Multi-node training needs InfiniBand or at least "
            f"{MIN_MULTI_NODE_ETHERNET_GBPS} GbE between nodes; {net.name} is too slow for {n} nodes."))
    if getattr(net, "on_request", False):
        messages.append(Message(
            INFO, "network", f"{net.name} is on request: staff confirm the fabric before approval."))
    if recommended_nvme_tb and config.nvme.size_tb < recommended_nvme_tb:
        messages.append(Message(
            WARNING, "nvme", f"{config.nvme.size_tb} TB is below the {_tb(recommended_nvme_tb)} "
            "recommended for the dataset, kept checkpoints and scratch space."))
    if stock is not None and stock < n:
        if stock == 0:
            text = f"{config.sku.name} is out of stock: the order waits until a node is free."
        else:
            text = (f"Only {stock} {config.sku.name} node{'s' if stock != 1 else ''} in stock "
                    f"for {n} requested: the order waits for the rest.")
        messages.append(Message(WARNING, "sku", text))
    if config.storage_tb and config.storage_provider is None:
        messages.append(Message(ERROR, "storage_provider",
                                "Choose an object-storage provider for the bucket, or set 0 TB."))
    if not 0 <= config.storage_tb <= MAX_STORAGE_TB:
        messages.append(Message(ERROR, "storage_tb",
                                f"Object storage is sized between 0 and {MAX_STORAGE_TB} TB."))
    return tuple(messages)


def evaluate(config: Configuration, *, recommended_nvme_tb: float | None = None,
             stock: int | None = None) -> Evaluation:
    return Evaluation(price=price(config),
                      messages=check(config, recommended_nvme_tb=recommended_nvme_tb, stock=stock))


def pick_nvme(options, size_tb: float, raid: str | None = None):
    """The smallest option at least `size_tb` large (the matching RAID layout first)."""
    options = sorted(options, key=lambda o: (o.size_tb, o.price_monthly))
    if not options:
        return None
    big_enough = [o for o in options if o.size_tb >= size_tb] or [options[-1]]
    smallest = big_enough[0].size_tb
    same_size = [o for o in big_enough if o.size_tb == smallest]
    return next((o for o in same_size if raid and o.raid == raid), same_size[0])


def pick_network(options, *, nodes: int, kind: str | None = None, speed_gbps: float | None = None):
    """The option a plan asked for, or the cheapest one the rules allow for `nodes`."""
    options = sorted(options, key=lambda o: (o.speed_gbps, o.price_monthly))
    if kind or speed_gbps:
        for o in options:
            if (kind is None or o.kind == kind) and (speed_gbps is None or o.speed_gbps >= speed_gbps):
                return o
    allowed = [o for o in options if nodes == 1 or o.kind == "infiniband"
               or o.speed_gbps >= MIN_MULTI_NODE_ETHERNET_GBPS]
    if nodes == 1:
        default = next((o for o in allowed if getattr(o, "is_default", False)), None)
        return default or (allowed[0] if allowed else None)
    infiniband = [o for o in allowed if o.kind == "infiniband"]
    return (infiniband or allowed or [None])[0]


def _tb(value: float) -> str:
    return f"{value:g} TB" if float(value) == int(value) else f"{value:.1f} TB"
