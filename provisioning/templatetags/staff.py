"""``{% load staff %}``: ``{% staff_counts as counts %}`` for the badges in the staff navigation."""

from django import template

from provisioning.staff import dashboard

register = template.Library()


@register.simple_tag(takes_context=True)
def staff_counts(context) -> dict[str, int]:
    user = context["request"].user
    if not user.is_authenticated or not getattr(user, "is_hosting_staff", False):
        return {}
    return dashboard.staff_counts(user)
