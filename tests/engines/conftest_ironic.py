"""pytest plugin: a real standalone Ironic on loopback (see tests/engines/ironic.py).

Loaded for the whole suite by ``pytest_plugins`` in tests/conftest.py. When the pinned Ironic
cannot be built or does not start, the tests fail under CI=true and are skipped elsewhere
(``missing_service``); ``TRAINYARD_SKIP_IRONIC=1`` opts out explicitly (skipped, with reason).
"""

from __future__ import annotations

import json
import os
import sqlite3
import threading
import time
import uuid
from pathlib import Path

import pytest
import requests
import yaml

from provisioning.drivers.base import NodeTarget
from provisioning.drivers.ironic import IronicDriver
from tests.conftest import missing_service
from tests.engines.ironic import IronicServer, IronicUnavailable, start_ironic
from tests.provisioning.sshd import SshdUnavailable, SshTestHost, start_sshd

API_VERSION = "1.115"  # what Ironic 39 speaks; runbooks need >= 1.92
IRONIC_USER = "trainyard"


@pytest.fixture(scope="session")
def ironic_engine(tmp_path_factory) -> IronicServer:
    if os.environ.get("TRAINYARD_SKIP_IRONIC") == "1":
        pytest.skip("TRAINYARD_SKIP_IRONIC=1: the Ironic engine tests are opted out")
    root = tmp_path_factory.mktemp("ironic")
    try:
        server = start_ironic(root, auth_strategy="http_basic", deploy_delay="1",
                              basic_auth=(IRONIC_USER, uuid.uuid4().hex))
    except IronicUnavailable as exc:
        missing_service(f"this test needs a standalone Ironic: {exc}")
    try:
        yield server
    finally:
        server.stop()


class IronicAdmin:
    """What an operator does on the engine side, through its REST API (not the driver)."""

    def __init__(self, server: IronicServer):
        self.server = server
        self.session = requests.Session()
        self.session.auth = server.htpasswd
        self.session.headers["X-OpenStack-Ironic-API-Version"] = API_VERSION

    def _call(self, method: str, path: str, **kwargs):
        reply = self.session.request(method, f"{self.server.url}/v1{path}", timeout=30, **kwargs)
        if reply.status_code >= 400:
            raise AssertionError(f"{method} {path}: {reply.status_code} {reply.text[:500]}")
        return reply.json() if reply.content else None

    def node(self, ident: str) -> dict:
        return self._call("GET", f"/nodes/{ident}")

    def enrol(self, name: str | None = None, *, resource_class: str = "gpu-h100",
              properties: dict | None = None, driver_info: dict | None = None) -> dict:
        """A fake-hardware node, managed and provided (cleaned) until it is ``available``."""
        name = name or f"ir-{uuid.uuid4().hex[:10]}"
        node = self._call("POST", "/nodes", json={
            "name": name, "driver": "fake-hardware", "resource_class": resource_class,
            "properties": properties or {}, "driver_info": driver_info or {}})
        self.provision(node["uuid"], "manage", until="manageable")
        self.provision(node["uuid"], "provide", until="available")
        return self.node(node["uuid"])

    def provision(self, ident: str, target: str, *, until: str | None = None, **body):
        self._call("PUT", f"/nodes/{ident}/states/provision", json={"target": target, **body})
        if until:
            return self.wait(ident, until)
        return None

    def wait(self, ident: str, state: str, timeout: float = 60) -> dict:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            node = self.node(ident)
            if node["provision_state"] == state and not node["target_provision_state"]:
                return node
            time.sleep(0.2)
        raise AssertionError(f"node {ident} not {state} after {timeout:g}s: "
                             f"{node['provision_state']} ({node['last_error']})")

    def patch(self, ident: str, *ops) -> dict:
        return self._call("PATCH", f"/nodes/{ident}", json=list(ops))

    def maintenance(self, ident: str, reason: str) -> None:
        self._call("PUT", f"/nodes/{ident}/maintenance", json={"reason": reason})

    def runbook(self, name: str, steps: list[dict]) -> dict:
        return self._call("POST", "/runbooks", json={"name": name, "steps": steps})


@pytest.fixture(scope="session")
def ironic_admin(ironic_engine) -> IronicAdmin:
    return IronicAdmin(ironic_engine)


@pytest.fixture(scope="session")
def ironic_contract_node(ironic_admin) -> str:
    """One available node for the driver contract's cases (tests/provisioning/test_driver_contract.py)."""
    return ironic_admin.enrol("contract-node")["uuid"]


def stored_configdrive(server: IronicServer, node_uuid: str) -> dict:
    """The configdrive as Ironic stored it for the deploy interface (its API shows '******'):
    read from the engine's own SQLite database."""
    with sqlite3.connect(server.root / "ironic.sqlite") as db:
        (text,) = db.execute("select instance_info from nodes where uuid = ?",
                             (node_uuid,)).fetchone()
    return json.loads(text).get("configdrive") or {}


def deploy_steps_run(server: IronicServer, node_uuid: str) -> int:
    """How many times the conductor ran the deploy step on the node (its log says each)."""
    text = (server.root / "ironic.log").read_text(errors="replace")
    return sum(1 for line in text.splitlines()
               if "'step': 'deploy'" in line and "Executing" in line and node_uuid in line)


@pytest.fixture(scope="session")
def installed_host(tmp_path_factory) -> SshTestHost:
    """A real sshd test host standing in for the system Ironic installs: a host of its own (its
    own fence files), apart from the ssh driver's ``sshd_host``."""
    try:
        base = tmp_path_factory.mktemp("installed-sshd")
        (base / "node-root").mkdir()
        host = start_sshd(base, env={"TRAINYARD_ROOT": str(base / "node-root")})
    except SshdUnavailable as exc:
        missing_service(f"this test needs a real sshd test host: {exc}")
    try:
        yield host
    finally:
        host.stop()


@pytest.fixture
def ironic_driver_for(ironic_engine, installed_host):
    """Builds an IronicDriver for an Ironic node whose installed system is the sshd test host
    ``installed_host``; keyword arguments override its options (``ironic`` ones merge)."""
    sshd_host = installed_host
    def build(node: str = "", *, hostname: str = "ironic-test-node", fence=None,
              address: str | None = None, ironic: dict | None = None, **options) -> IronicDriver:
        user, password = ironic_engine.htpasswd
        base = {
            "ironic": {"url": ironic_engine.url, "auth": "http_basic", "username": user,
                       "password": password, "node": node, "timeout_s": 5, **(ironic or {})},
            "images": {TEST_IMAGE: dict(TEST_IMAGE_SPEC)},
            "poll_interval_s": 0.2, "deploy_timeout_s": 60, "clean_timeout_s": 60,
            "host_key": sshd_host.host_public_key, "private_key": sshd_host.client_key_pem,
            "user": sshd_host.user, "connect_timeout_s": 5, "auth_timeout_s": 5,
            "test_host": True,
        }
        base.update(options)
        return IronicDriver(NodeTarget(hostname=hostname,
                                       address=address or f"{sshd_host.host}:{sshd_host.port}",
                                       gpu_count=0, options=base, fence=fence))

    return build


TEST_IMAGE = "ubuntu-24.04"
# Fake hardware writes nothing, so the URL is never fetched; the checksum is still required.
TEST_IMAGE_SPEC = {"url": "http://images.invalid/ubuntu-24.04.qcow2",
                   "checksum": "sha256:" + "ab" * 32}


class FirstBoot(threading.Thread):
    """Stands in for cloud-init on the system Ironic installs: once Ironic holds the node's
    configdrive, starts an sshd on ``port`` that presents the host key of its ``#cloud-config``
    (``ssh_keys``) and accepts the management user's keys (``users[0].ssh_authorized_keys``).
    Fake hardware boots nothing; this is what the image's cloud-init does at first boot."""

    def __init__(self, server: IronicServer, node_uuid: str, root: Path, port: int,
                 env: dict[str, str] | None = None):
        super().__init__(daemon=True)
        self.server, self.node_uuid, self.root, self.port, self.env = (
            server, node_uuid, root, port, env)
        self.host: SshTestHost | None = None
        self.error: Exception | None = None

    def run(self) -> None:
        try:
            deadline = time.monotonic() + 60
            while not (drive := stored_configdrive(self.server, self.node_uuid)):
                if time.monotonic() > deadline:
                    raise TimeoutError("Ironic never stored a configdrive for the node")
                time.sleep(0.05)
            config = yaml.safe_load(drive["user_data"])
            keys = self.root / "management_keys"
            self.root.mkdir(parents=True, exist_ok=True)
            keys.write_text("\n".join(config["users"][0]["ssh_authorized_keys"]) + "\n")
            host_key = (config["ssh_keys"]["ed25519_private"], config["ssh_keys"]["ed25519_public"])
            self.host = start_sshd(self.root / "sshd", env=self.env, host_key=host_key,
                                   authorized_keys_files=(str(keys),), port=self.port)
        except Exception as exc:  # noqa: BLE001 (handed to the test)
            self.error = exc

    def stop(self) -> None:
        self.join(60)
        if self.host is not None:
            self.host.stop()
