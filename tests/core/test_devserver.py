"""`make run`'s last step: web server + worker on the embedded broker, stopped by Ctrl-C."""

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request

import pytest

from portal.core.management.commands.devserver import dev_site_url
from tests.conftest import REPO_ROOT


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_devserver_serves_with_a_worker_on_the_embedded_broker_and_stops_on_ctrl_c(tmp_path):
    env = {k: v for k, v in os.environ.items()
           if k not in {"DATABASE_URL", "REDIS_URL", "DJANGO_ALLOW_ASYNC_UNSAFE", "SITE_URL"}}
    env["TRAINYARD_VAR_DIR"] = str(tmp_path)
    manage = [sys.executable, "manage.py"]
    for step in (["migrate", "--noinput", "-v0"], ["seed_catalog"]):
        subprocess.run(manage + step, cwd=REPO_ROOT, env=env, check=True, capture_output=True)
    port = _free_port()
    proc = subprocess.Popen(manage + ["devserver", "--addr", f"127.0.0.1:{port}"], cwd=REPO_ROOT,
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        # two workers answer: the step worker and the sweeper's (its own queue)
        health = _wait_for_worker(f"http://127.0.0.1:{port}/healthz", workers=2)
        assert health == {"database": "ok", "broker": "ok", "worker": "ok (2)", "status": "ok"}
        catalog = urllib.request.urlopen(f"http://127.0.0.1:{port}/catalog/", timeout=5).read()
        assert b"8\xc3\x97 NVIDIA H100 SXM5 80GB" in catalog
    finally:
        proc.send_signal(signal.SIGINT)
        output, _ = proc.communicate(timeout=40)
    assert proc.returncode == 0
    assert f"Trainyard is running at http://127.0.0.1:{port}/" in output
    assert f"links in e-mails use http://127.0.0.1:{port})" in output  # SITE_URL follows the port
    assert "Warm shutdown" in output  # the worker was stopped, not orphaned


def _wait_for_worker(url: str, workers: int, timeout: float = 60) -> dict:
    deadline, last = time.monotonic() + timeout, None
    while time.monotonic() < deadline:
        try:
            last = json.loads(urllib.request.urlopen(url, timeout=5).read())
            if last["worker"] == f"ok ({workers})":
                return last
        except OSError:
            pass
        time.sleep(1)
    raise AssertionError(f"no worker answered /healthz within {timeout}s: {last}")


@pytest.mark.parametrize(("addr", "url"), [
    ("127.0.0.1:8123", "http://127.0.0.1:8123"), ("0.0.0.0:9000", "http://localhost:9000"),
    ("[::1]:8000", "http://[::1]:8000"), ("localhost:8001", "http://localhost:8001")])
def test_make_run_points_site_url_at_the_port_it_serves(addr, url):
    assert dev_site_url(addr) == url
