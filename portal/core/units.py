"""Numbers with units, the one formatter set: bytes, storage, bandwidth, money, time, throughput.

Pure Python (standard library only, no Django): the estimator, the recommender's explanations,
the charts, the configurator and the template filters (``{% load units %}``) all format through
here. Sizes are decimal, as GPU and disk datasheets print them (1 GB = 10**9 bytes); ``gib``
is for binary figures.
"""

from __future__ import annotations

from decimal import ROUND_HALF_UP, Decimal

GB = 10**9
TB = 10**12
GiB = 2**30
MISSING = "—"  # what a page shows for a figure it does not have
CENT = Decimal("0.01")


def gb(n_bytes: float) -> str:
    """61_200_000_000 → "61.2 GB"."""
    return f"{float(n_bytes) / GB:,.1f} GB"


def size(n_bytes: float) -> str:
    """A size in decimal units: 58_000 → "58.0 kB"; 61_200_000_000 → "61.2 GB"; 512 → "512 B"."""
    n = float(n_bytes)
    for unit, scale in (("TB", 1e12), ("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n >= scale:
            return f"{n / scale:,.1f} {unit}"
    return f"{int(n)} B"


def gib(n_bytes: float) -> str:
    """2**31 → "2.0 GiB"."""
    return f"{float(n_bytes) / GiB:,.1f} GiB"


def tb(n_tb: float) -> str:
    """A size already in terabytes: 3 → "3 TB"; 3.2 → "3.2 TB"."""
    n_tb = float(n_tb)
    return f"{n_tb:,.0f} TB" if n_tb == int(n_tb) else f"{n_tb:,.1f} TB"


def gbps(gbit_per_s: float) -> str:
    """Network line rate: 400 → "400 Gb/s"; 1600 → "1.6 Tb/s"."""
    value = float(gbit_per_s)
    return f"{value / 1000:g} Tb/s" if value >= 1000 else f"{value:g} Gb/s"


def usd(value) -> str:
    """A price to the cent: Decimal("33956.6") → "$33,956.60"."""
    return f"${Decimal(str(value)):,.2f}"


def usd_approx(value) -> str:
    """An estimate of what a job costs: whole dollars from $1,000 up, cents below, rounded half up
    as money is (portal.catalog.pricing): Decimal("1002.50") → "$1,003"."""
    amount = Decimal(str(value))
    if not amount.is_finite():
        return MISSING
    if abs(amount) < 1000 and abs(cents := amount.quantize(CENT, rounding=ROUND_HALF_UP)) < 1000:
        return f"${cents:,}"
    return f"${int(amount.to_integral_value(rounding=ROUND_HALF_UP)):,}"


def usd_compact(value: float) -> str:
    """For chart labels, three significant digits at most: "$1.2M", "$12k", "$1.5k", "$590",
    "$4.20" (never "$1,200k": a million is "$1.2M")."""
    value = float(value)
    for limit, suffix in ((1e9, "B"), (1e6, "M"), (1e3, "k")):
        n = float(f"{value / limit:.3g}")  # 999,999 rounds to 1.00 of the larger unit: "$1M"
        if n >= 1:
            return f"${n:,.0f}{suffix}" if n >= 100 else f"${n:g}{suffix}"
    if value == 0:
        return "$0"
    return f"${value:,.0f}" if value >= 10 else f"${value:,.2f}"


def hours(h: float) -> str:
    """12.4 → "12.4 h"; 130 → "5.4 days"; 0.3 → "18 min" (never "0 min")."""
    h = float(h)
    if h < 1:
        return f"{max(1, round(h * 60))} min"
    if h < 48:
        return f"{h:,.1f} h"
    return f"{h / 24:,.1f} days"


def hours_compact(h: float) -> str:
    """For chart labels: like ``hours`` but whole hours from 10 h up."""
    h = float(h)
    if h < 1:
        return f"{max(1, round(h * 60))} min"
    if h < 48:
        return f"{h:,.1f} h" if h < 10 else f"{h:,.0f} h"
    return f"{h / 24:,.1f} days"


def duration(seconds: float) -> str:
    """How long something ran: "42 s", "3 min 05 s", "1 h 02 min"."""
    seconds = max(0, int(seconds))
    if seconds < 60:
        return f"{seconds} s"
    if seconds < 3600:
        return f"{seconds // 60} min {seconds % 60:02d} s"
    return f"{seconds // 3600} h {seconds % 3600 // 60:02d} min"


def tokens_per_s(value: float) -> str:
    value = float(value)
    if value >= 1e6:
        return f"{value / 1e6:,.2f} M tokens/s"
    if value >= 1e3:
        return f"{value / 1e3:,.1f} k tokens/s"
    return f"{value:,.0f} tokens/s"


def count(value: float) -> str:
    """1.2e9 → "1.2 B"; 8e6 → "8.0 M"."""
    value = float(value)
    for limit, suffix in ((1e12, "T"), (1e9, "B"), (1e6, "M"), (1e3, "k")):
        if value >= limit:
            return f"{value / limit:,.1f} {suffix}"
    return f"{value:,.0f}"


def pct(fraction: float, digits: int = 0) -> str:
    return f"{float(fraction) * 100:.{int(digits)}f}%"


def celsius(value: float) -> str:
    return f"{float(value):.0f} °C"
