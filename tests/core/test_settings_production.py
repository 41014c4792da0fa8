"""Production settings: `check --deploy` is clean, and missing secrets fail loudly."""

import os
import subprocess
import sys

from cryptography.fernet import Fernet

from tests.conftest import REPO_ROOT

PRODUCTION_ENV = {
    "TRAINYARD_ENV": "production",
    "SECRET_KEY": "k" * 20 + "Q7v!x9#pL2@mZ4$wR8%tY6^uI3&oP1*aS5(dF0)gH",
    "ALLOWED_HOSTS": "portal.example.com",
    "DATABASE_URL": "postgres://trainyard:pw@127.0.0.1:5432/trainyard",
    "REDIS_URL": "redis://127.0.0.1:6379/0",
    "FIELD_ENCRYPTION_KEY": Fernet.generate_key().decode(),
}


def manage(*args, env):
    dropped = set(PRODUCTION_ENV) | {"DEBUG", "DJANGO_ALLOW_ASYNC_UNSAFE"}  # the latter: browser tests
    clean = {k: v for k, v in os.environ.items() if k not in dropped}
    return subprocess.run([sys.executable, "manage.py", *args], cwd=REPO_ROOT,
                          env=clean | env, capture_output=True, text=True, timeout=120)


def test_check_deploy_is_clean_with_production_values():
    result = manage("check", "--deploy", "--fail-level", "WARNING", env=PRODUCTION_ENV)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "System check identified no issues" in result.stdout


def test_production_without_secret_key_fails_loudly():
    env = {k: v for k, v in PRODUCTION_ENV.items() if k != "SECRET_KEY"}
    result = manage("check", env=env)
    assert result.returncode != 0
    assert "SECRET_KEY must be set" in result.stderr


def test_production_refuses_debug():
    result = manage("check", env=PRODUCTION_ENV | {"DEBUG": "true"})
    assert result.returncode != 0
    assert "DEBUG must be false" in result.stderr


def test_bad_boolean_is_reported_with_its_name():
    result = manage("check", env=PRODUCTION_ENV | {"SECURE_SSL_REDIRECT": "perhaps"})
    assert result.returncode != 0
    assert "SECURE_SSL_REDIRECT='perhaps' is not a boolean" in result.stderr
