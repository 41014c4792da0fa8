"""Login throttling (django-axes): the lockout page, and what operators see and unlock.

Axes counts failed log-ins per username and per client address (settings: LOGIN_FAILURE_LIMIT,
LOGIN_LOCKOUT_MINUTES); at the limit the login answers 429 with the page below until the
lockout ends, a log-in succeeds elsewhere for that user, or an operator unlocks it.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from axes.models import AccessAttempt
from axes.utils import reset
from django.conf import settings
from django.shortcuts import render
from django.utils import timezone


def login_username(request, credentials=None) -> str:
    """The username axes counts, cut to what a username can be: Django's login form does not
    enforce the length, and axes stores it in a 255-character column (a longer one was a 500)."""
    name = (credentials or {}).get("username")
    if name is None:
        name = request.POST.get("username", "") if request is not None else ""
    return str(name)[:150]


def lockout_minutes() -> int:
    return max(1, int(settings.AXES_COOLOFF_TIME.total_seconds() // 60))


def lockout_response(request, original_response=None, credentials=None):
    username = (credentials or {}).get("username") or request.POST.get("username", "")
    return render(request, "registration/locked_out.html", {
        "failure_limit": settings.AXES_FAILURE_LIMIT, "minutes": lockout_minutes(),
        "username": username[:150]}, status=429)


@dataclass(frozen=True)
class Lockout:
    id: int
    username: str
    ip_address: str
    failures: int
    last_at: datetime
    locked: bool


def lockouts_list() -> list[Lockout]:
    """Recent failed log-ins, locked ones first (within the lockout period only)."""
    since = timezone.now() - settings.AXES_COOLOFF_TIME
    rows = AccessAttempt.objects.filter(attempt_time__gte=since).order_by("-failures_since_start",
                                                                           "-attempt_time")[:200]
    return [Lockout(id=row.pk, username=row.username or "", ip_address=row.ip_address or "",
                    failures=row.failures_since_start, last_at=row.attempt_time,
                    locked=row.failures_since_start >= settings.AXES_FAILURE_LIMIT) for row in rows]


def lockout_clear(*, attempt_id: int) -> bool:
    """Unlock the username and the address of one attempt row; False when it is gone."""
    row = AccessAttempt.objects.filter(pk=attempt_id).first()
    if row is None:
        return False
    if row.username:
        reset(username=row.username)
    if row.ip_address:
        reset(ip=row.ip_address)
    return True
