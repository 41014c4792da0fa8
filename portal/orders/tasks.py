"""Thin Celery tasks of the orders app."""

from __future__ import annotations

from celery import shared_task
from django.contrib.auth import get_user_model
from django.core.mail import send_mail
from django.db.models import Q

APPROVERS, OPERATORS = "approver", "operator"


def staff_recipients(role: str) -> list[str]:
    """E-mail addresses of the active staff with ``role`` (superusers hold every role)."""
    users = get_user_model().objects.filter(Q(staff_role=role) | Q(is_superuser=True), is_active=True)
    return sorted({u.email for u in users if u.email})


@shared_task(name="orders.staff_notify", acks_late=True, autoretry_for=(OSError,), max_retries=3,
             retry_backoff=True)
def staff_notify_task(role: str, subject: str, body: str) -> int:
    """Sends one staff e-mail to everyone holding ``role`` (mail server blips are retried)."""
    to = staff_recipients(role)
    if not to:
        return 0
    return send_mail(subject=subject, message=body, from_email=None, recipient_list=to)
