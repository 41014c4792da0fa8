"""A real, temporary customer account on this machine (the tests run as root in CI): what the
hand-back's scripts check an account against (uid, home of its own) needs one."""

from __future__ import annotations

import os
import shutil
import subprocess
import uuid
from contextlib import contextmanager
from pathlib import Path

from tests.conftest import missing_service


@contextmanager
def temporary_account(base: Path = Path("/srv")):
    """(name, home): an unprivileged account whose home is under ``base`` (outside /tmp, which
    the hand-back cleans of the customer's files)."""
    if os.geteuid() != 0 or not shutil.which("useradd") or not os.access(base, os.W_OK):
        missing_service(f"this test creates an account: it needs root, useradd and a writable {base}")
    name = f"ty{uuid.uuid4().hex[:8]}"
    home = base / f"home-{name}"
    subprocess.run(["useradd", "-m", "-d", str(home), "-s", "/bin/bash", name], check=True)
    subprocess.run(["usermod", "-p", "*", name], check=True)  # key login only, not "locked"
    try:
        yield name, home
    finally:
        subprocess.run(["pkill", "-KILL", "-u", name], check=False)
        subprocess.run(["crontab", "-r", "-u", name], check=False, capture_output=True)
        subprocess.run(["userdel", "-r", name], check=False, capture_output=True)
        shutil.rmtree(home, ignore_errors=True)
