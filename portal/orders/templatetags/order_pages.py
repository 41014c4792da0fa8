"""Small display helpers for the order, approval, run and inventory pages."""

from django import template

register = template.Library()


@register.filter
def duration(step) -> str:
    """How long a step ran (or has been running): "42 s", "3 min 05 s", "1 h 02 min"."""
    from django.utils import timezone

    start = getattr(step, "started_at", None)
    if start is None:
        return ""
    end = getattr(step, "finished_at", None) or timezone.now()
    seconds = max(0, int((end - start).total_seconds()))
    if seconds < 60:
        return f"{seconds} s"
    if seconds < 3600:
        return f"{seconds // 60} min {seconds % 60:02d} s"
    return f"{seconds // 3600} h {seconds % 3600 // 60:02d} min"


@register.filter
def log_text(lines) -> str:
    return "\n".join(lines or ())


@register.filter
def humanize_key(key) -> str:
    """memory_breakdown_bytes keys: "optimizer_states" → "Optimizer states"."""
    return str(key).replace("_", " ").capitalize()


@register.filter
def celsius(value) -> str:
    if value in (None, ""):
        return "—"
    return f"{float(value):.0f} °C"


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
