"""A real OpenStack Ironic, standalone, for the Ironic driver's tests: the all-in-one ``ironic``
process (API and conductor in one, ``rpc_transport = none``), SQLite, no authentication
(``noauth``) or HTTP basic, and only ``fake-hardware`` nodes.

The pinned Ironic lives in its own virtualenv, built once by ``tests/engines/ironic_venv.sh`` and
cached outside the repo. Used by the ``ironic_engine`` fixture (tests/engines/conftest_ironic.py).

Failure knobs the engine itself offers (nothing here fakes a reply):
- ``deploy_delay``: each fake deploy/tear-down call sleeps that long, so a deploy is seen in
  ``deploying`` and a process killed meanwhile leaves it to the conductor's restart, which moves
  it to ``deploy failed`` ("can't be resumed by conductor").
- a cleaning runbook named in a node's ``driver_info.cleaning_runbook`` replaces its automated
  cleaning (``[conductor] automated_cleaning_runbook_from_node``): a runbook whose BIOS step gets
  malformed settings fails the clean in the conductor (``clean failed``).
- ``pause()``/``resume()`` stop and continue the process (SIGSTOP/SIGCONT): the API hangs, as an
  overloaded or partitioned engine does.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import textwrap
import time
from dataclasses import dataclass, field
from pathlib import Path

import requests

REPO_ROOT = Path(__file__).resolve().parents[2]
VENV_SCRIPT = REPO_ROOT / "tests" / "engines" / "ironic_venv.sh"
IRONIC_VERSION = "39.0.0"
START_TIMEOUT_S = 90


class IronicUnavailable(RuntimeError):
    """The Ironic virtualenv could not be built or the process did not come up."""


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def ironic_venv() -> Path:
    """The cached virtualenv's directory, built on first use."""
    try:
        done = subprocess.run(["bash", str(VENV_SCRIPT)], capture_output=True, text=True,
                              timeout=1800, env={**os.environ, "IRONIC_VERSION": IRONIC_VERSION})
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise IronicUnavailable(f"cannot build the Ironic venv: {exc}") from None
    if done.returncode != 0:
        raise IronicUnavailable(f"building the Ironic venv failed: {done.stderr.strip()[-2000:]}")
    return Path(done.stdout.strip().splitlines()[-1])


CONFIG = """\
[DEFAULT]
host = trainyard-test-conductor
rpc_transport = none
auth_strategy = {auth_strategy}
enabled_hardware_types = fake-hardware
enabled_bios_interfaces = fake
enabled_boot_interfaces = fake
enabled_console_interfaces = fake,no-console
enabled_deploy_interfaces = fake
enabled_firmware_interfaces = no-firmware
enabled_inspect_interfaces = fake,no-inspect
enabled_management_interfaces = fake
enabled_network_interfaces = noop
enabled_power_interfaces = fake
enabled_raid_interfaces = fake,no-raid
enabled_rescue_interfaces = fake,no-rescue
enabled_storage_interfaces = noop
enabled_vendor_interfaces = fake,no-vendor
default_network_interface = noop
minimum_memory_warning_only = true
state_path = {root}
log_file = {root}/ironic.log
use_stderr = false
debug = false

[api]
host_ip = 127.0.0.1
port = {port}

[database]
connection = sqlite:///{root}/ironic.sqlite

[dhcp]
dhcp_provider = none

[conductor]
automated_clean = true
automated_cleaning_step_source = hybrid
automated_cleaning_runbook_from_node = true
automated_cleaning_runbook_validate_traits = false
allow_provisioning_in_maintenance = false
sync_power_state_interval = -1
heartbeat_interval = 2

[deploy]
configdrive_use_object_store = false

[fake]
deploy_delay = {deploy_delay}

[oslo_concurrency]
lock_path = {root}/locks

[json_rpc]
auth_strategy = noauth
"""


@dataclass
class IronicServer:
    venv: Path
    root: Path
    port: int
    auth_strategy: str = "noauth"
    deploy_delay: str = "1"
    proc: subprocess.Popen | None = field(default=None, repr=False)
    htpasswd: tuple[str, str] | None = None  # (user, password) under http_basic

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def config_path(self) -> Path:
        return self.root / "ironic.conf"

    def write_config(self) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        (self.root / "locks").mkdir(exist_ok=True)
        text = CONFIG.format(root=self.root, port=self.port, auth_strategy=self.auth_strategy,
                             deploy_delay=self.deploy_delay)
        if self.auth_strategy == "http_basic":
            text += f"\n[DEFAULT]\nhttp_basic_auth_user_file = {self.root}/htpasswd\n"
        self.config_path.write_text(text)

    def create_schema(self) -> None:
        done = subprocess.run([str(self.venv / "bin" / "ironic-dbsync"),
                               f"--config-file={self.config_path}", "create_schema"],
                              capture_output=True, text=True, timeout=300)
        if done.returncode != 0:
            raise IronicUnavailable(f"ironic-dbsync create_schema failed: {done.stderr[-2000:]}")

    def start(self, timeout: float = START_TIMEOUT_S) -> None:
        log = open(self.root / "ironic.stdout", "ab")  # noqa: SIM115 (the process keeps it)
        self.proc = subprocess.Popen(
            [str(self.venv / "bin" / "ironic"), f"--config-file={self.config_path}"],
            stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            start_new_session=True)  # the launcher forks: signals go to the whole group
        log.close()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise IronicUnavailable(f"ironic exited with {self.proc.returncode}: "
                                        f"{self.log_tail()}")
            try:
                reply = requests.get(f"{self.url}/v1/drivers", timeout=2, auth=self.htpasswd)
                if reply.status_code == 200 and "fake-hardware" in reply.text:
                    return
            except requests.RequestException:
                pass
            time.sleep(0.2)
        self.stop()
        raise IronicUnavailable(f"the Ironic API did not answer within {timeout:g}s: "
                                f"{self.log_tail()}")

    def _signal(self, sig: int) -> None:
        if self.proc is not None and self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, sig)
            except ProcessLookupError:
                pass

    def stop(self) -> None:
        """SIGTERM to the process group; SIGKILL if it lingers."""
        if self.proc is None:
            return
        self._signal(signal.SIGCONT)
        self._signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self._signal(signal.SIGKILL)
            self.proc.wait(timeout=10)
        self._reap_group()

    def kill(self) -> None:
        """SIGKILL, as a crash or a power cut: no clean shutdown of the conductor."""
        if self.proc is None:
            return
        self._signal(signal.SIGKILL)
        self.proc.wait(timeout=10)
        self._reap_group()

    def _reap_group(self) -> None:
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)  # forked children of the launcher
        except ProcessLookupError:
            pass

    def pause(self) -> None:
        self._signal(signal.SIGSTOP)

    def resume(self) -> None:
        self._signal(signal.SIGCONT)

    def restart(self) -> None:
        self.stop()
        self.start()

    def log_tail(self, chars: int = 3000) -> str:
        texts = []
        for name in ("ironic.stdout", "ironic.log"):
            path = self.root / name
            if path.exists():
                texts.append(path.read_text(errors="replace")[-chars:])
        return "\n".join(texts)


def write_htpasswd(path: Path, user: str, password: str, venv: Path) -> None:
    """An htpasswd line with a bcrypt hash (what Ironic's http_basic accepts), made with the
    bcrypt in Ironic's own venv."""
    code = textwrap.dedent("""
        import bcrypt, sys
        print(sys.argv[1] + ":" + bcrypt.hashpw(sys.argv[2].encode(), bcrypt.gensalt(4)).decode())
    """)
    done = subprocess.run([str(venv / "bin" / "python"), "-c", code, user, password],
                          capture_output=True, text=True, check=True)
    path.write_text(done.stdout)


def start_ironic(root: Path, *, auth_strategy: str = "noauth", deploy_delay: str = "1",
                 basic_auth: tuple[str, str] | None = None) -> IronicServer:
    venv = ironic_venv()
    server = IronicServer(venv=venv, root=root, port=free_port(), auth_strategy=auth_strategy,
                          deploy_delay=deploy_delay, htpasswd=basic_auth)
    server.write_config()
    if basic_auth:
        write_htpasswd(root / "htpasswd", *basic_auth, venv=venv)
    server.create_schema()
    server.start()
    return server
