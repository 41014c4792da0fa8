"""Log-in retention: expired sessions go (what `clearsessions` does), django-axes' log-in log goes
past LOGIN_LOG_RETENTION_DAYS through axes' own API; live sessions and recent log-ins stay."""

from datetime import timedelta

import pytest
from axes.models import AccessAttempt, AccessLog
from django.conf import settings
from django.contrib.sessions.backends.db import SessionStore
from django.contrib.sessions.models import Session
from django.utils import timezone

from portal.accounts.retention import login_logs_prune, sessions_clear_expired
from portal.accounts.tasks import retention_task

pytestmark = pytest.mark.django_db


def _session(expires_in: timedelta) -> str:
    store = SessionStore()
    store["who"] = "alice"
    store.create()
    Session.objects.filter(session_key=store.session_key).update(expire_date=timezone.now() + expires_in)
    return store.session_key


def _log(age: timedelta) -> AccessLog:
    row = AccessLog.objects.create(user_agent="pytest", ip_address="192.0.2.1", username="alice",
                                   http_accept="*/*", path_info="/login/")
    AccessLog.objects.filter(pk=row.pk).update(attempt_time=timezone.now() - age)
    return row


def test_expired_sessions_go_and_live_ones_stay(settings):
    settings.RETENTION_BATCH_SIZE = 2
    expired = [_session(-timedelta(minutes=m + 1)) for m in range(5)]
    live = _session(timedelta(minutes=1))
    assert sessions_clear_expired(now=timezone.now()) == {"sessions.Session": 5}
    assert list(Session.objects.values_list("session_key", flat=True)) == [live]
    assert not Session.objects.filter(session_key__in=expired).exists()
    assert sessions_clear_expired(now=timezone.now()) == {}


def test_axes_log_past_the_window_goes_through_axes():
    window = timedelta(days=settings.LOGIN_LOG_RETENTION_DAYS)
    old = _log(window + timedelta(minutes=5))
    recent = _log(window - timedelta(minutes=5))
    attempt = AccessAttempt.objects.create(user_agent="pytest", ip_address="192.0.2.1",
                                           username="alice", http_accept="*/*",
                                           path_info="/login/", failures_since_start=1)
    assert login_logs_prune() == {"axes.AccessLog": 1}
    assert list(AccessLog.objects.values_list("pk", flat=True)) == [recent.pk]
    assert not AccessLog.objects.filter(pk=old.pk).exists()
    assert AccessAttempt.objects.filter(pk=attempt.pk).exists()  # lock-outs are axes' own business
    assert login_logs_prune() == {}


def test_the_task_does_both_and_a_zero_window_keeps_the_log(settings):
    settings.LOGIN_LOG_RETENTION_DAYS = 0
    _log(timedelta(days=4000))
    _session(-timedelta(days=1))
    assert retention_task.apply().get() == {"sessions.Session": 1}
    assert AccessLog.objects.count() == 1
