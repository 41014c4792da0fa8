"""Numbers with units for templates: bytes, money, bandwidth."""

from decimal import Decimal

from django import template

register = template.Library()


@register.filter
def gb(value_bytes) -> str:
    if value_bytes in (None, ""):
        return "—"
    return f"{int(value_bytes) / 1e9:,.1f} GB"


@register.filter
def usd(value) -> str:
    if value in (None, ""):
        return "—"
    return f"${Decimal(value):,.2f}"


@register.filter
def gbps(value) -> str:
    if value in (None, ""):
        return "—"
    value = float(value)
    return f"{value / 1000:g} Tb/s" if value >= 1000 else f"{value:g} Gb/s"
