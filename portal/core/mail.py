"""Every e-mail Trainyard sends: from ``DEFAULT_FROM_EMAIL``, with ``SUPPORT_EMAIL`` as the
reply path, so "reply to this e-mail" reaches a person (the sender is often a no-reply address)."""

from __future__ import annotations

from django.conf import settings
from django.core.mail import EmailMessage


def send(*, subject: str, body: str, to: list[str]) -> int:
    """Sends one plain-text message to ``to``; returns how many were sent (0 or 1)."""
    if not to:
        return 0
    return EmailMessage(subject=subject, body=body, from_email=settings.DEFAULT_FROM_EMAIL,
                        to=list(to), reply_to=[settings.SUPPORT_EMAIL]).send()
