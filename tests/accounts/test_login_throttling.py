"""Login throttling (django-axes): per username and per address, a clear lockout page, and an
operator unlock at /ops/logins/."""

import os
import subprocess
import sys

import pytest
from django.test import Client

from tests.conftest import REPO_ROOT
from tests.factories import UserFactory, verified_login

pytestmark = pytest.mark.django_db
GOOD = "correct-horse-battery"


def _login(username, password, ip="10.0.0.1", **extra):
    client = Client()
    return client, client.post("/accounts/login/", {"username": username, "password": password},
                               REMOTE_ADDR=ip, **extra)


def _fail(times, username, ip="10.0.0.1"):
    statuses = [_login(username, "wrong", ip)[1].status_code for _ in range(times)]
    assert statuses[:-1] == [200] * (times - 1)  # the form's error until the limit is reached


def test_a_username_is_locked_after_the_limit_from_any_address(settings):
    UserFactory(username="alice")
    _fail(settings.AXES_FAILURE_LIMIT, "alice", ip="10.0.0.1")
    client, response = _login("alice", GOOD, ip="10.0.0.2")
    assert response.status_code == 429
    html = response.content.decode()
    assert "Too many failed log-ins" in html and "locked for 15 minutes" in html
    assert "_auth_user_id" not in client.session


def test_fewer_failures_then_a_success_resets_the_count(settings):
    UserFactory(username="alice")
    _fail(settings.AXES_FAILURE_LIMIT - 1, "alice")
    assert _login("alice", GOOD)[1].status_code == 302
    _fail(settings.AXES_FAILURE_LIMIT - 1, "alice")
    assert _login("alice", GOOD)[1].status_code == 302


def test_an_address_is_locked_after_the_limit_whatever_the_username(settings):
    UserFactory(username="bob")
    for n in range(settings.AXES_FAILURE_LIMIT):
        _fail(1, f"guess{n}", ip="10.0.0.9")
    assert _login("bob", GOOD, ip="10.0.0.9")[1].status_code == 429
    assert _login("bob", GOOD, ip="10.0.0.10")[1].status_code == 302  # others are not affected


def test_an_operator_unlocks_and_customers_cannot_see_the_page(people, settings):
    UserFactory(username="dora")
    _fail(settings.AXES_FAILURE_LIMIT, "dora")
    customer = Client()
    customer.force_login(people.alice)
    assert customer.get("/ops/logins/").status_code in (403, 404)
    operator = Client()
    verified_login(operator, people.olga)
    page = operator.get("/ops/logins/").content.decode()
    assert "dora" in page and "Locked" in page
    from axes.models import AccessAttempt

    attempt = AccessAttempt.objects.get(username="dora")
    operator.post("/ops/logins/", {"attempt": attempt.pk})
    assert _login("dora", GOOD)[1].status_code == 302


def test_forwarded_for_counts_only_behind_a_trusted_proxy(settings):
    UserFactory(username="erin")
    settings.TRUSTED_PROXY = False
    for n in range(settings.AXES_FAILURE_LIMIT):  # a client claiming other addresses
        _login(f"x{n}", "wrong", ip="10.0.0.5", HTTP_X_FORWARDED_FOR=f"192.0.2.{n}")
    assert _login("erin", GOOD, ip="10.0.0.5")[1].status_code == 429
    settings.TRUSTED_PROXY = True
    behind_proxy = _login("erin", GOOD, ip="10.0.0.5", HTTP_X_FORWARDED_FOR="6.6.6.6, 198.51.100.7")
    assert behind_proxy[1].status_code == 302


@pytest.mark.parametrize(("value", "expected"), [("true", "('HTTP_X_FORWARDED_PROTO', 'https')"),
                                                 ("false", "None"), (None, "None")])
def test_the_proxy_ssl_header_is_trusted_only_when_the_operator_says_so(value, expected):
    env = {k: v for k, v in os.environ.items() if k != "TRUSTED_PROXY"}
    if value is not None:
        env["TRUSTED_PROXY"] = value
    out = subprocess.run([sys.executable, "-c", "import django; from django.conf import settings; "
                          "django.setup(); print(settings.SECURE_PROXY_SSL_HEADER)"],
                         env=env | {"DJANGO_SETTINGS_MODULE": "portal.settings"}, cwd=REPO_ROOT,
                         capture_output=True, text=True, check=True)
    assert out.stdout.strip() == expected


def test_an_overlong_username_is_an_ordinary_failed_log_in():
    client, response = _login("x" * 3000, "wrong")
    assert response.status_code == 200
    assert "Please enter a correct username and password" in response.content.decode()
