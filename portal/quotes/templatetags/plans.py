"""``{% load plans %}``: ``plan|readable_plan`` is the stored plan when pages can compute with
it, else None (the template then says the plan is unreadable instead of failing)."""

from django import template

from portal.quotes.plans import plan_readable

register = template.Library()


@register.filter
def readable_plan(plan):
    return plan_readable(plan) if plan else None
