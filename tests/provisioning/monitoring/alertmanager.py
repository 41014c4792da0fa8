"""Debian's Alertmanager (``prometheus-alertmanager``) on loopback, for tests, with the repo's
config (provisioning/monitoring/alertmanager/alertmanager.yml, the file compose mounts) pointed at
the live portal: its receiver's URL and token file are the test's, and the route's waits are
seconds instead of minutes (its receiver, grouping and ``send_resolved`` are as shipped).
``webhook_payload`` builds the same webhook body (version 4) for the receiver's unit tests."""

from __future__ import annotations

import hashlib
import json
import urllib.parse
from datetime import UTC, datetime
from pathlib import Path

import yaml

from tests.provisioning.monitoring.prometheus import REPO, Daemon, start_daemon

CONFIG = REPO / "provisioning/monitoring/alertmanager/alertmanager.yml"
TEST_WAITS = {"group_wait": "1s", "group_interval": "1s"}


def alertmanager_config(*, portal_url: str, token_file: Path) -> dict:
    config = yaml.safe_load(CONFIG.read_text())
    config["route"] |= TEST_WAITS
    for receiver in config["receivers"]:
        for webhook in receiver["webhook_configs"]:
            path = urllib.parse.urlsplit(webhook["url"]).path
            webhook["url"] = f"{portal_url}{path}"
            webhook["http_config"]["authorization"]["credentials_file"] = str(token_file)
    return config


def start_alertmanager(workdir: Path, config: dict) -> Daemon:
    """One Alertmanager, no cluster (an empty --cluster.listen-address: no gossip port)."""
    workdir.mkdir(exist_ok=True)
    config_file = workdir / "alertmanager.yml"
    config_file.write_text(yaml.safe_dump(config))
    return start_daemon("Alertmanager", "prometheus-alertmanager",
                        [f"--config.file={config_file}", f"--storage.path={workdir / 'data'}",
                         "--cluster.listen-address="], workdir=workdir)


def fingerprint(labels: dict) -> str:
    return hashlib.sha256(json.dumps(labels, sort_keys=True).encode()).hexdigest()[:16]


def webhook_payload(alerts: list[dict], *, status: str) -> dict:
    """``alerts``: Prometheus's alert objects (labels, annotations, activeAt)."""
    now = datetime.now(UTC).isoformat().replace("+00:00", "Z")
    items = [{"status": status, "labels": a["labels"], "annotations": a.get("annotations", {}),
              "startsAt": a["activeAt"], "endsAt": now if status == "resolved" else "0001-01-01T00:00:00Z",
              "generatorURL": "", "fingerprint": fingerprint(a["labels"])} for a in alerts]
    return {"version": "4", "groupKey": "{}:{}", "truncatedAlerts": 0, "status": status,
            "receiver": "trainyard", "groupLabels": {}, "commonLabels": {},
            "commonAnnotations": {}, "externalURL": "http://alertmanager.test", "alerts": items}
