"""Sizing numbers with units for templates: durations, throughput, terabytes, counts."""

from django import template

from portal.sizing.recommend import explain

register = template.Library()


@register.filter
def hours(value) -> str:
    """12.4 → "12.4 h"; 130 → "5.4 days"; 0.3 → "18 min"."""
    if value in (None, ""):
        return "—"
    return explain.hours(float(value))


@register.filter
def tokens_per_s(value) -> str:
    if value in (None, ""):
        return "—"
    value = float(value)
    if value >= 1e6:
        return f"{value / 1e6:,.2f} M tokens/s"
    if value >= 1e3:
        return f"{value / 1e3:,.1f} k tokens/s"
    return f"{value:,.0f} tokens/s"


@register.filter
def tb(value) -> str:
    if value in (None, ""):
        return "—"
    value = float(value)
    return f"{value:,.0f} TB" if value == int(value) else f"{value:,.1f} TB"


@register.filter
def count(value) -> str:
    """1.2e9 → "1.2 B"; 8e6 → "8.0 M"."""
    if value in (None, ""):
        return "—"
    value = float(value)
    for limit, suffix in ((1e12, "T"), (1e9, "B"), (1e6, "M"), (1e3, "k")):
        if value >= limit:
            return f"{value / limit:,.1f} {suffix}"
    return f"{value:,.0f}"


@register.filter
def usd_total(value) -> str:
    """Whole dollars above $1,000, cents below."""
    if value in (None, ""):
        return "—"
    value = float(value)
    return f"${value:,.0f}" if value >= 1000 else f"${value:,.2f}"


@register.filter
def pct(value, digits=0) -> str:
    if value in (None, ""):
        return "—"
    return f"{float(value) * 100:.{int(digits)}f}%"


@register.filter
def get(mapping, key):
    try:
        return mapping.get(key)
    except AttributeError:
        return None


@register.filter
def get_errors(form, name):
    """A bound form's errors for one field (empty before validation or when valid)."""
    return form.errors.get(name, []) if form.is_bound else []
