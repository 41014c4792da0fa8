"""A real Prometheus (Debian's ``prometheus``) on a free loopback port, for tests: the repo's
config (provisioning/monitoring/prometheus/prometheus.yml) with the addresses and intervals of
the test, the repo's rule files, a temporary storage directory. Never the systemd service."""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import time
import urllib.parse
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import yaml

from tests.conftest import missing_service

REPO = Path(__file__).resolve().parents[3]
CONFIG = REPO / "provisioning/monitoring/prometheus/prometheus.yml"
RULES = REPO / "provisioning/monitoring/prometheus/rules"


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


@dataclass
class Prometheus:
    url: str
    proc: subprocess.Popen
    log: Path

    def api(self, path: str, **params) -> dict:
        query = f"?{urllib.parse.urlencode(params)}" if params else ""
        with urllib.request.urlopen(f"{self.url}{path}{query}", timeout=10) as response:
            body = json.load(response)
        assert body["status"] == "success", body
        return body["data"]

    def wait_for(self, what: str, check, timeout: float = 60.0):
        """Polls ``check()`` until it returns something true (Prometheus works on intervals)."""
        deadline = time.monotonic() + timeout
        while True:
            value = check()
            if value:
                return value
            if time.monotonic() > deadline:
                raise AssertionError(f"Prometheus: {what} did not happen in {timeout:.0f} s\n"
                                     f"{self.log.read_text()[-3000:]}")
            time.sleep(0.5)

    def output(self) -> str:
        return self.log.read_text()


def test_config(*, portal_url: str, token_file: Path, rule_files: list[Path],
                interval: str = "1s") -> dict:
    """The repo's config as the test runs it: service discovery and /metrics at the live portal,
    short intervals, no Alertmanager (the test posts firing alerts to the receiver itself)."""
    config = yaml.safe_load(CONFIG.read_text())
    config["global"] = {"scrape_interval": interval, "evaluation_interval": interval}
    config["rule_files"] = [str(p) for p in rule_files]
    config.pop("alerting", None)
    portal = urllib.parse.urlsplit(portal_url)
    for job in config["scrape_configs"]:
        for sd in job.get("http_sd_configs", []):
            sd["url"] = urllib.parse.urlunsplit(
                (portal.scheme, portal.netloc, urllib.parse.urlsplit(sd["url"]).path, "", ""))
            sd["refresh_interval"] = interval
            sd["authorization"]["credentials_file"] = str(token_file)
        if "static_configs" in job:
            job["static_configs"] = [{"targets": [portal.netloc]}]
            job["authorization"]["credentials_file"] = str(token_file)
    return config


def start_prometheus(tmp_path: Path, config: dict) -> Prometheus:
    binary = shutil.which("prometheus") or "/usr/bin/prometheus"
    if not Path(binary).exists():
        missing_service("Debian's prometheus is not installed (apt-get install prometheus)")
    config_file = tmp_path / "prometheus.yml"
    config_file.write_text(yaml.safe_dump(config))
    port = free_port()
    log = tmp_path / "prometheus.log"
    proc = subprocess.Popen(
        [binary, f"--config.file={config_file}", f"--storage.tsdb.path={tmp_path / 'tsdb'}",
         f"--web.listen-address=127.0.0.1:{port}", "--storage.tsdb.retention.time=1d"],
        stdout=log.open("wb"), stderr=subprocess.STDOUT)
    server = Prometheus(url=f"http://127.0.0.1:{port}", proc=proc, log=log)
    deadline = time.monotonic() + 30
    while True:
        try:
            with urllib.request.urlopen(f"{server.url}/-/ready", timeout=2) as response:
                if response.status == 200:
                    return server
        except OSError:
            pass
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            raise AssertionError(f"prometheus did not start:\n{log.read_text()[-3000:]}")
        time.sleep(0.2)


def stop_prometheus(server: Prometheus) -> None:
    server.proc.terminate()
    try:
        server.proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        server.proc.kill()
        server.proc.wait()
