"""``{% load plans %}``: ``plan|readable_plan`` is the stored plan when pages can compute with
it, else None (the template then says the plan is unreadable instead of failing)."""

from django import template

from portal.quotes.plans import plan_readable
from portal.sizing.services import strategy_label

register = template.Library()


@register.filter
def readable_plan(plan):
    readable = plan_readable(plan) if plan else None
    if readable and not readable.get("strategy_label"):  # older plans: the stack's name, not its slug
        readable = {**readable, "strategy_label": strategy_label(str(readable.get("strategy", "")))}
    return readable
