"""``{% load accounts %}``: what the login page and the navigation ask of the accounts app."""

from django import template
from django.conf import settings

register = template.Library()


@register.simple_tag
def signup_enabled() -> bool:
    """Whether anyone may create an account (the operator's SIGNUP_ENABLED)."""
    return settings.SIGNUP_ENABLED
