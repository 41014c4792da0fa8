"""Retention of what log-ins leave behind (beat task ``accounts.retention``).

- Sessions: what ``manage.py clearsessions`` does (the session engine's expired sessions go),
  in batches when sessions live in the database.
- django-axes: its own API (the one its ``axes_reset_logs`` and ``axes_reset_failure_logs``
  commands call) deletes the log-in log older than LOGIN_LOG_RETENTION_DAYS. Axes deletes
  expired lock-out counters (AccessAttempt) itself at every log-in attempt.
"""

from __future__ import annotations

from collections import Counter
from datetime import datetime
from importlib import import_module

from axes.handlers.proxy import AxesProxyHandler
from django.conf import settings
from django.contrib.sessions.backends.db import SessionStore as DatabaseSessionStore

from portal.core.retention import delete_in_batches


def sessions_clear_expired(*, now: datetime, batch_size: int | None = None) -> Counter[str]:
    store = import_module(settings.SESSION_ENGINE).SessionStore
    if not issubclass(store, DatabaseSessionStore):  # cache, file or cookie sessions
        store.clear_expired()
        return Counter()
    # The rule of DatabaseSessionStore.clear_expired, a batch at a time.
    return delete_in_batches(store.get_model_class().objects.filter(expire_date__lt=now),
                             batch_size=batch_size)


def login_logs_prune() -> Counter[str]:
    days = settings.LOGIN_LOG_RETENTION_DAYS
    if days == 0:
        return Counter()
    deleted = Counter({"axes.AccessLog": AxesProxyHandler.reset_logs(age_days=days),
                       "axes.AccessFailureLog": AxesProxyHandler.reset_failure_logs(age_days=days)})
    return +deleted  # without the zeros
