"""The one template-tag library: ``{% load units %}``.

Numbers with units format through ``portal.core.units`` (a page shows "—" for a missing
figure); a few display helpers for forms, steps and logs sit alongside.
"""

from django import template
from django.utils import timezone
from django.utils.timesince import timesince

from portal.core import units

register = template.Library()


def _or_missing(format_value):
    """A filter that formats a value, or shows "—" when there is none."""
    def wrapped(value):
        if value in (None, ""):
            return units.MISSING
        return format_value(value)
    wrapped.__name__ = format_value.__name__
    wrapped.__doc__ = format_value.__doc__
    return wrapped


register.filter("gb", _or_missing(units.gb))
register.filter("tb", _or_missing(units.tb))
register.filter("size", _or_missing(units.size))
register.filter("gbps", _or_missing(units.gbps))
register.filter("usd", _or_missing(units.usd))
register.filter("usd_total", _or_missing(units.usd_approx))
register.filter("hours", _or_missing(units.hours))
register.filter("tokens_per_s", _or_missing(units.tokens_per_s))
register.filter("count", _or_missing(units.count))
register.filter("celsius", _or_missing(units.celsius))


@register.filter
def pct(value, digits=0) -> str:
    return units.MISSING if value in (None, "") else units.pct(value, digits)


@register.filter
def duration(step) -> str:
    """How long a step ran (or has been running so far); empty before it started."""
    start = getattr(step, "started_at", None)
    if start is None:
        return ""
    end = getattr(step, "finished_at", None) or timezone.now()
    return units.duration((end - start).total_seconds())


@register.filter
def humanize_key(key) -> str:
    """memory_breakdown_bytes keys: "optimizer_states" → "Optimizer states"."""
    return str(key).replace("_", " ").capitalize()


@register.filter
def log_text(lines) -> str:
    return "\n".join(lines or ())


@register.filter
def focus_step(node_progress):
    """The step whose log a person wants to see: running, waiting to retry, failed, else the last done."""
    steps = list(getattr(node_progress, "steps", ()))
    for status in ("running", "retrying", "failed"):
        for step in steps:
            if step.status == status:
                return step
    done = [s for s in steps if s.status == "succeeded"]
    return done[-1] if done else None


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


@register.filter
def since(value) -> str:
    """How long ago ``value`` was: "under a minute" rather than Django's "0 minutes"."""
    if not value:
        return ""
    if (timezone.now() - value).total_seconds() < 60:
        return "under a minute"
    return timesince(value)
