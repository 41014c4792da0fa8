"""IPMI_PASSWORD_FILE: the ssh driver's BMC password from a mounted secret file."""

import os
import subprocess
import sys

from tests.conftest import REPO_ROOT

SHOW = ("from django.conf import settings; ipmi = settings.NODE_DRIVER_OPTIONS['ssh'].get('ipmi'); "
        "print('none' if ipmi is None else 'match' if ipmi == {'password': 'Bmc pass 7!'} else 'other')")


def _shell(**env):
    clean = {k: v for k, v in os.environ.items() if k != "IPMI_PASSWORD_FILE"}
    return subprocess.run([sys.executable, "manage.py", "shell", "--no-imports", "-c", SHOW], cwd=REPO_ROOT,
                          env=clean | env, capture_output=True, text=True, timeout=120)


def test_the_password_is_read_from_the_file(tmp_path):
    secret = tmp_path / "ipmi_password"
    secret.write_text("Bmc pass 7!\n")
    result = _shell(IPMI_PASSWORD_FILE=str(secret))
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "match"
    assert "Bmc pass 7!" not in result.stderr


def test_without_the_file_no_password_is_set():
    for env in ({}, {"IPMI_PASSWORD_FILE": ""}):
        result = _shell(**env)
        assert result.returncode == 0, result.stderr
        assert result.stdout.strip() == "none"


def test_an_unreadable_or_empty_file_fails_loudly(tmp_path):
    result = _shell(IPMI_PASSWORD_FILE=str(tmp_path / "missing"))
    assert result.returncode != 0
    assert "IPMI_PASSWORD_FILE=" in result.stderr and "cannot be read" in result.stderr
    empty = tmp_path / "empty"
    empty.write_text("\n")
    result = _shell(IPMI_PASSWORD_FILE=str(empty))
    assert result.returncode != 0 and "IPMI_PASSWORD_FILE names an empty file" in result.stderr
