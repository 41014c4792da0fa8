"""A real Redfish BMC on loopback: sushy-tools' ``sushy-emulator`` with its fake system driver
(``SUSHY_EMULATOR_FAKE_DRIVER``; a power change lands 1–11 s after it was asked, as on real
hardware) behind HTTP basic auth (an htpasswd file with a bcrypt hash, the only kind it reads).

``redfish_emulator`` (module scope) starts one on a free port with the systems in ``SYSTEMS``;
give each test its own system, since their power states persist for the module. Without the
``sushy-emulator`` program the tests fail under CI=true and are skipped elsewhere.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import bcrypt
import pytest
import requests

from tests.conftest import missing_service

USER, PASSWORD = "trainyard", "bmc-pass-1234"
# id → name; every system starts powered off
SYSTEMS = {"sys-power": "gpu-power", "sys-boot": "gpu-boot", "sys-page": "gpu-page",
           "sys-ssh": "gpu-ssh", "sys-status": "gpu-status"}


@dataclass
class RedfishEmulator:
    url: str
    log: Path
    process: subprocess.Popen

    def options(self, system_id: str, **overrides) -> dict:
        """A node's ``redfish`` driver options for ``system_id`` (with the settings' password)."""
        return {"address": self.url, "user": USER, "password": PASSWORD, "system_id": system_id,
                "timeout_s": 10, "settle_timeout_s": 60, **overrides}

    def power_state(self, system_id: str) -> str:
        """What the emulator says, read past Trainyard's client."""
        response = requests.get(f"{self.url}/redfish/v1/Systems/{system_id}",
                                auth=(USER, PASSWORD), timeout=10)
        response.raise_for_status()
        return response.json()["PowerState"]

    def boot(self, system_id: str) -> dict:
        response = requests.get(f"{self.url}/redfish/v1/Systems/{system_id}",
                                auth=(USER, PASSWORD), timeout=10)
        response.raise_for_status()
        return response.json()["Boot"]

    def resets_asked(self, system_id: str) -> int:
        """Reset actions the emulator logged for ``system_id``."""
        return self.log.read_text().count(f"POST /redfish/v1/Systems/{system_id}/Actions/"
                                          "ComputerSystem.Reset")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def emulator_program() -> str | None:
    beside = Path(sys.executable).parent / "sushy-emulator"
    return str(beside) if beside.exists() else shutil.which("sushy-emulator")


def start_emulator(base: Path) -> RedfishEmulator:
    program = emulator_program()
    if program is None:
        missing_service("sushy-emulator is not installed (pip install the dev extra: sushy-tools)")
    htpasswd = base / "htpasswd"
    htpasswd.write_text(f"{USER}:{bcrypt.hashpw(PASSWORD.encode(), bcrypt.gensalt(4)).decode()}\n")
    systems = [{"uuid": sid, "name": name, "power_state": "Off", "external_notifier": False,
                "nics": []} for sid, name in SYSTEMS.items()]
    config = base / "emulator.conf"
    config.write_text(f"SUSHY_EMULATOR_FAKE_DRIVER = True\n"
                      f"SUSHY_EMULATOR_AUTH_FILE = {str(htpasswd)!r}\n"
                      f"SUSHY_EMULATOR_STATE_DIR = {str(base / 'state')!r}\n"
                      f"SUSHY_EMULATOR_FAKE_SYSTEMS = {systems!r}\n")
    port = _free_port()
    log = base / "emulator.log"
    with log.open("wb") as out:
        process = subprocess.Popen([program, "--config", str(config), "-i", "127.0.0.1",
                                    "-p", str(port)], stdout=out, stderr=subprocess.STDOUT,
                                   env={**os.environ, "PYTHONUNBUFFERED": "1"})
    emulator = RedfishEmulator(url=f"http://127.0.0.1:{port}", log=log, process=process)
    deadline = time.monotonic() + 30
    while True:
        try:
            if requests.get(f"{emulator.url}/redfish/v1/", timeout=2).ok:
                return emulator
        except requests.ConnectionError:
            pass
        if process.poll() is not None or time.monotonic() > deadline:
            process.kill()
            pytest.fail(f"sushy-emulator did not start: {log.read_text()[-2000:]}")
        time.sleep(0.1)


@pytest.fixture(scope="module", name="redfish_emulator")
def redfish_emulator_fixture(tmp_path_factory):
    emulator = start_emulator(tmp_path_factory.mktemp("redfish"))
    try:
        yield emulator
    finally:
        emulator.process.terminate()
        try:
            emulator.process.wait(10)
        except subprocess.TimeoutExpired:
            emulator.process.kill()
