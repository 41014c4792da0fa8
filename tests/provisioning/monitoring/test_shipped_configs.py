"""The monitoring configs compose runs are the repo's files, valid for the daemons' own checkers,
and wired to each other the way compose names things: Prometheus → alertmanager:9093, Alertmanager
→ the web service's receiver, each reading the token file its entrypoint writes."""

from __future__ import annotations

import re
import shutil
import subprocess
import urllib.parse

import pytest
import yaml

from tests.conftest import missing_service
from tests.provisioning.monitoring.alertmanager import CONFIG as ALERTMANAGER_CONFIG
from tests.provisioning.monitoring.prometheus import CONFIG as PROMETHEUS_CONFIG
from tests.provisioning.monitoring.prometheus import REPO

COMPOSE = yaml.safe_load((REPO / "docker-compose.yml").read_text())["services"]


def _mounted_at(service: str, repo_file) -> str:
    """Where compose mounts ``repo_file`` into ``service`` (read-only)."""
    source = f"./{repo_file.relative_to(REPO)}"
    [target] = [v.split(":")[1] for v in COMPOSE[service]["volumes"]
                if v.split(":")[0] == source and v.endswith(":ro")]
    return target


def _flag(service: str, name: str) -> str:
    [value] = re.findall(rf"--{re.escape(name)}=(\S+)", " ".join(COMPOSE[service]["entrypoint"]))
    return value


def _token_file(service: str) -> str:
    [path] = re.findall(r"> (/\S+) &&", " ".join(COMPOSE[service]["entrypoint"]))
    return path


def _web_port() -> str:
    [port] = re.findall(r"--bind 0\.0\.0\.0:(\d+)", " ".join(COMPOSE["web"]["command"]))
    return port


def test_alertmanager_runs_the_repos_config_posting_to_the_web_services_receiver():
    assert _mounted_at("alertmanager", ALERTMANAGER_CONFIG) == _flag("alertmanager", "config.file")
    config = yaml.safe_load(ALERTMANAGER_CONFIG.read_text())
    [receiver] = [r for r in config["receivers"] if r["name"] == config["route"]["receiver"]]
    [webhook] = receiver["webhook_configs"]
    assert webhook["send_resolved"] is True
    assert urllib.parse.urlsplit(webhook["url"])[:3] == ("http", f"web:{_web_port()}", "/monitoring/alerts")
    assert webhook["http_config"]["authorization"] == {
        "type": "Bearer", "credentials_file": _token_file("alertmanager")}
    assert "MONITORING_ALERT_TOKEN" in COMPOSE["alertmanager"]["environment"]


def test_prometheus_runs_the_repos_config_alerting_the_alertmanager_service():
    assert _mounted_at("prometheus", PROMETHEUS_CONFIG) == _flag("prometheus", "config.file")
    config = yaml.safe_load(PROMETHEUS_CONFIG.read_text())
    [alertmanager] = config["alerting"]["alertmanagers"]
    assert alertmanager["static_configs"] == [{"targets": ["alertmanager:9093"]}]
    assert "alertmanager" in COMPOSE
    token = _token_file("prometheus")
    for job in config["scrape_configs"]:
        for client in [job, *job.get("http_sd_configs", [])]:
            if "authorization" in client:
                assert client["authorization"]["credentials_file"] == token, job["job_name"]


@pytest.mark.parametrize("tool, args, config", [
    ("amtool", ["check-config"], ALERTMANAGER_CONFIG),
    ("promtool", ["check", "config", "--syntax-only"], PROMETHEUS_CONFIG)])
def test_the_daemons_own_checkers_accept_the_shipped_configs(tool, args, config):
    binary = shutil.which(tool)
    if binary is None:
        missing_service(f"{tool} is not installed (Debian's prometheus / prometheus-alertmanager)")
    result = subprocess.run([binary, *args, str(config)], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stdout + result.stderr
