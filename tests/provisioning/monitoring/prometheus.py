"""A real Prometheus (Debian's ``prometheus``) on a free loopback port, for tests: the repo's
config (provisioning/monitoring/prometheus/prometheus.yml) with the addresses and intervals of
the test, the repo's rule files, a temporary storage directory. Never the systemd service.
``start_daemon`` also starts Debian's Alertmanager (tests/provisioning/monitoring/alertmanager.py):
both answer /-/ready once they serve."""

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
class Daemon:
    """A Prometheus or an Alertmanager the test started; ``api`` reads Prometheus's JSON API."""

    name: str
    url: str
    proc: subprocess.Popen
    log: Path

    def get(self, path: str, **params):
        query = f"?{urllib.parse.urlencode(params)}" if params else ""
        with urllib.request.urlopen(f"{self.url}{path}{query}", timeout=10) as response:
            return json.load(response)

    def api(self, path: str, **params) -> dict:
        """Prometheus's JSON API: the ``data`` of a successful answer."""
        body = self.get(path, **params)
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
                raise AssertionError(f"{self.name}: {what} did not happen in {timeout:.0f} s\n"
                                     f"{self.log.read_text()[-3000:]}")
            time.sleep(0.5)

    def output(self) -> str:
        return self.log.read_text()


def test_config(*, portal_url: str, token_file: Path, rule_files: list[Path],
                alertmanager: str | None = None, interval: str = "1s") -> dict:
    """The repo's config as the test runs it: service discovery and /metrics at the live portal,
    short intervals, alerts to the test's Alertmanager (``host:port``) or to none."""
    config = yaml.safe_load(CONFIG.read_text())
    config["global"] = {"scrape_interval": interval, "evaluation_interval": interval}
    config["rule_files"] = [str(p) for p in rule_files]
    if alertmanager is None:
        config.pop("alerting")
    else:
        [shipped] = config["alerting"]["alertmanagers"]
        shipped["static_configs"] = [{"targets": [alertmanager]}]
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


def start_daemon(name: str, binary: str, args: list[str], *, workdir: Path) -> Daemon:
    """Starts ``binary`` on a free loopback port (``args`` get ``--web.listen-address``) and
    waits until it answers /-/ready; its output goes to ``workdir/<name>.log``."""
    found = shutil.which(binary) or f"/usr/bin/{binary}"
    if not Path(found).exists():
        missing_service(f"Debian's {binary} is not installed (apt-get install {binary})")
    port = free_port()
    log = workdir / f"{name.lower()}.log"
    proc = subprocess.Popen([found, *args, f"--web.listen-address=127.0.0.1:{port}"],
                            stdout=log.open("wb"), stderr=subprocess.STDOUT)
    server = Daemon(name=name, url=f"http://127.0.0.1:{port}", proc=proc, log=log)
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
            raise AssertionError(f"{binary} did not start:\n{log.read_text()[-3000:]}")
        time.sleep(0.2)


def stop_daemon(server: Daemon) -> None:
    server.proc.terminate()
    try:
        server.proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        server.proc.kill()
        server.proc.wait()


def start_prometheus(tmp_path: Path, config: dict) -> Daemon:
    config_file = tmp_path / "prometheus.yml"
    config_file.write_text(yaml.safe_dump(config))
    return start_daemon("Prometheus", "prometheus",
                        [f"--config.file={config_file}", f"--storage.tsdb.path={tmp_path / 'tsdb'}",
                         "--storage.tsdb.retention.time=1d"], workdir=tmp_path)
