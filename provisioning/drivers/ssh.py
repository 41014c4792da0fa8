"""A node we reach over SSH (paramiko): key-based login, host key pinned, scripts streamed.

Built for one node: ``SshDriver(target)``. ``target.address`` is ``"host"`` or ``"host:port"``;
``target.options`` (``settings.NODE_DRIVER_OPTIONS["ssh"]`` overlaid by the node's
``driver_options``) says the rest:

- ``host_key`` (required): the node's public host key, pinned. One ``"ssh-ed25519 AAAA…"``
  line (a known_hosts line with host names in front is fine too), a ``"SHA256:…"`` fingerprint
  as ``ssh-keygen -lf`` prints it, or a list of either. No pin, or a key that does not match,
  refuses the node with a permanent error before any credential is sent. There is no
  "trust on first use": read the key from the node's console or its installer, not the wire.
- ``private_key``: the client's private key (OpenSSH or PEM text). It comes decrypted from the
  caller (a secret file, ``SSH_PRIVATE_KEY_FILE``) and never goes into a log line or an error.
  ``private_key_file`` names a key file instead (e.g. a container secret);
  ``private_key_passphrase`` unlocks an encrypted key. Password login is never tried,
  nor an agent, nor ``~/.ssh``.
- ``login_user``: the account the customer logs in with, shown on the server page (default
  ``settings.PROVISIONING_LOGIN_USER``); not used by the driver itself.
- ``user`` (``"root"``), ``port`` (``22``; a port in ``address`` wins),
  ``connect_timeout_s`` (``10``: TCP connect, banner and key exchange), ``auth_timeout_s``
  (``15``), ``sudo`` (default: on unless the user is root; runs scripts with ``sudo -n``).
- ``apt_packages``: what ``deploy_os`` makes sure is installed (default
  ``DEFAULT_APT_PACKAGES``).
- ``reboot_command`` / ``poweroff_command``: what ``power`` runs over SSH
  (``systemctl reboot`` / ``systemctl poweroff``).
- ``nvidia_smi``: the path of ``nvidia-smi`` on the node, if it is not on ``PATH``.
- ``test_host``: a declared CPU test host (a developer's or CI's machine): ``power`` only
  checks it is reachable (no reboot, power-off or BMC command is run) and ``deploy_os`` checks
  the prerequisites without installing any.
- ``ipmi``: ``{"address", "user", "password", "interface": "lanplus"}``: with it, ``power``
  drives the BMC with the local ``ipmitool`` (``provisioning.power.ipmi``; password through
  ``IPMI_PASSWORD``, not argv).
  The password comes from settings (``IPMI_PASSWORD_FILE``), merged under the node's ``ipmi``;
  a node's driver_options may not hold it.
- ``redfish``: ``{"address", "user", "system_id", "verify_tls"}``: a Redfish BMC
  (``provisioning.power.redfish``), which ``power`` uses before ``ipmi``; the password comes from
  settings (``REDFISH_PASSWORD_FILE``) the same way.

Scripts travel over the SSH channel's stdin into a private temp file (``mktemp``, mode 0600)
and run with ``bash FILE </dev/null``, so a command in the script that reads stdin cannot eat
the rest of the script and ``env`` values (which may be secrets) never show up in ``ps``.
Output (stdout and stderr, merged into one pipe on the node so their order holds) is handed to ``on_line``
one line at a time as it arrives.

Fencing (``target.fence``, see ``drivers.base``): the staged file starts with a guard
(``stack/sh/fence_guard.sh``, its token in a header of values above it) that takes the node's
fence under ``flock`` in ``$TRAINYARD_ROOT/var/lib/trainyard`` (``fence``: the newest token seen;
``pgid``/``pgid.fence``: the process group of the script now running and its token). An older
token is refused (exit ``FENCED_EXIT_STATUS``); a newer one first kills the process group of the
older execution still running and waits until it is gone. The script runs in its own process
group (``setsid``); when it ends the guard checks the token again and reports
``FENCED_EXIT_STATUS`` instead of success if a newer execution took the node meanwhile. When the
worker cancels (its claim was lost), the driver kills that process group over a second channel
and closes the first. ``power`` checks the fence the same way before it acts
(``stack/sh/fence_check.sh``).

Errors: connection refused, unreachable, timeouts and a connection lost mid-script are
transient; no pin, a host key mismatch, a refused key, an unreadable key and a script that
the node cannot run at all are permanent. A script that ran and exited non-zero is returned
as a ``RunResult`` (the pipeline decides); by convention exit status ``RETRY_EXIT_STATUS``
(75, ``EX_TEMPFAIL``) means "try again later".
"""

from __future__ import annotations

import base64
import hashlib
import io
import logging
import re
import select
import shlex
import socket
import time
from collections import deque
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

import paramiko
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa

from provisioning.drivers.base import (
    FENCED_EXIT_STATUS,
    POWER_ACTIONS,
    RETRY_EXIT_STATUS,
    DeployFacts,
    DriverError,
    ExecutionStopped,
    GpuReading,
    HealthReport,
    LineCallback,
    NodeTarget,
    OptionsSchema,
    RunResult,
    split_address,
)
from provisioning.power import bmc_kind
from provisioning.power.ipmi import ipmi_power
from provisioning.power.redfish import RedfishBmc, RedfishPower
from provisioning.stack.paths import STATE
from provisioning.stack.shell import assignments, body, node_script

logger = logging.getLogger(__name__)

NO_NVIDIA_SMI_STATUS = 127
# python3-venv: Trainyard's node tools get a venv of their own (stack/sh/node_tools.sh).
DEFAULT_APT_PACKAGES = ("ca-certificates", "curl", "python3", "python3-venv")
OUTPUT_TAIL_LINES = 20
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
# "ubuntu-24.04", "debian-12", "ubuntu-24.04-cuda-12.8" (a variant after the version)
_IMAGE = re.compile(r"^(?P<id>[a-z]+)[-_: ]?(?P<version>\d+(?:\.\d+)*)(?:[-_+](?P<variant>.+))?$")
_NVIDIA_QUERY = "index,name,temperature.gpu,ecc.errors.uncorrected.volatile.total,memory.total"
# One CSV line per GPU ($1: nvidia-smi, $2: the status when it is missing, $3: the fields).
_HEALTH_COMMAND = body("gpu_health")
# Receives the script on stdin into a 0600 temp file, runs it with stdin closed, cleans up
# ($1: the fence directory; the rest: what runs it).
_RUN_STAGED = body("run_staged")
# Where the node keeps its fence; expanded by the login shell, passed to the (sudo) script.
_FENCE_DIR = f'"${{TRAINYARD_ROOT:-}}{STATE}"'
# Checks and takes the fence, then runs the command ($1: fence dir, $2: token).
_FENCE_CHECK = assignments({"TRAINYARD_FENCED_STATUS": FENCED_EXIT_STATUS}) + body("fence_check")
# Kills the process group of execution $2 if it is still the one running ($1: fence dir).
_CANCEL_COMMAND = body("fence_cancel")


class SshDriver:
    name = "ssh"
    simulated = False
    options_schema = OptionsSchema(host_key=True, login_user=True, bmc=True)

    def __init__(self, target: NodeTarget) -> None:
        self.target = target
        options = dict(target.options)
        self.host, self.port = split_address(target.address, int(options.get("port", 22)))
        self.user = str(options.get("user") or "root")
        self.pins = _parse_pins(options.get("host_key"))
        self.connect_timeout_s = float(options.get("connect_timeout_s", 10))
        self.auth_timeout_s = float(options.get("auth_timeout_s", 15))
        sudo = options.get("sudo", self.user != "root")
        self.sudo = sudo.strip().lower() in ("1", "true", "yes") if isinstance(sudo, str) else bool(sudo)
        self.apt_packages = tuple(options.get("apt_packages", DEFAULT_APT_PACKAGES))
        self.reboot_command = str(options.get("reboot_command") or "systemctl reboot")
        self.poweroff_command = str(options.get("poweroff_command") or "systemctl poweroff")
        self.ipmi = dict(options.get("ipmi") or {})
        self.nvidia_smi = str(options.get("nvidia_smi") or "nvidia-smi")
        # A declared CPU test host (a developer's or CI's machine): power commands and package
        # installs are never run on it; reachability stands in for them.
        self.test_host = options.get("test_host") is True
        # The key stays out of repr(), logs and error messages; it is parsed on connect.
        self._private_key_text = options.get("private_key")
        self._private_key_file = options.get("private_key_file")
        self._passphrase = options.get("private_key_passphrase")

    def __repr__(self) -> str:
        return f"<SshDriver {self.user}@{self.host}:{self.port} ({self.target.hostname})>"

    # --- the protocol ---------------------------------------------------------------------
    def deploy_os(self, *, image: str, on_line: LineCallback) -> DeployFacts:
        """On a host that is already installed (this driver cannot reinstall one).

        Checks that ``/etc/os-release`` is the ordered image (``ubuntu-22.04`` means
        ``ID=ubuntu`` and ``VERSION_ID=22.04``) and that the ``apt_packages`` prerequisites
        are installed, installing the missing ones with apt-get. A different OS is a
        permanent error that says so: reinstall the node, or enrol it with a driver that
        images machines. An image variant (``ubuntu-24.04-cuda-12.8``) is not installed either:
        the step log says so and shows the NVIDIA driver version the host has, and the
        acceptance test judges the GPUs.
        """
        match = _IMAGE.match((image or "").strip().lower())
        if not match:
            raise DriverError(f"cannot read OS image {image!r}: expected e.g. 'ubuntu-22.04' or "
                              "'debian-12'", permanent=True)
        script = _deploy_script(match["id"], match["version"], self.apt_packages,
                                variant=match["variant"] or "", install=not self.test_host)
        result = self.run(script, name="deploy_os", on_line=on_line, timeout_s=1800)
        if result.exit_status == 3:
            raise DriverError(f"{self.target.hostname} does not run {image}: "
                              f"{_last(result)}; the ssh driver does not reinstall an OS, "
                              "reinstall the node or use an imaging driver", permanent=True)
        if result.asks_retry:
            raise DriverError(f"{self.target.hostname}: installing prerequisites failed: "
                              f"{_last(result)}", permanent=False)
        if not result.ok:
            raise DriverError(f"{self.target.hostname}: OS check failed with exit status "
                              f"{result.exit_status}: {_last(result)}", permanent=True)
        return DeployFacts(image=image)  # checked, not installed: the host keys pinned stand

    def release(self, *, erase: bool, on_line: LineCallback) -> bool:
        """No engine behind an ssh node: the sanitise script cleans it."""
        return False

    def engine_check(self) -> None:
        return None

    def run(self, script: str, *, name: str, on_line: LineCallback,
            env: Mapping[str, str] | None = None, timeout_s: float = 1800) -> RunResult:
        fence = self.target.fence
        staged = staged_script(script, env or {}, token=None if fence is None else int(fence.token))
        runner = "sudo -n bash" if self.sudo else "bash"
        command = f"sh -c {shlex.quote(_RUN_STAGED)} _ {_FENCE_DIR} {runner}"
        logger.info("ssh run %s on %s (%d bytes)", name, self.target.hostname, len(script))
        with self._session() as transport:
            status, tail = self._exec(transport, command, stdin=staged.encode(), on_line=on_line,
                                      timeout_s=timeout_s, label=name)
        if fence is not None and status == FENCED_EXIT_STATUS:
            raise ExecutionStopped(f"{self.target.hostname}: {name}: {tail[-1] if tail else 'fenced'}")
        if status is None:
            raise DriverError(f"{self.target.hostname}: connection lost while {name} was running",
                              permanent=False)
        if status == 126 and not tail:
            raise DriverError(f"{self.target.hostname}: cannot stage script {name} (mktemp/cat "
                              "failed: is /tmp writable?)", permanent=True)
        return RunResult(exit_status=status, output_tail=tuple(tail))

    def power(self, action: str) -> None:
        if action not in POWER_ACTIONS:
            raise DriverError(f"unknown power action {action!r}; use on, off or reboot",
                              permanent=True)
        if self.test_host:
            with self._session():  # reachable; nothing is powered on a declared test host
                return
        if bmc_kind(self.target.options) == "redfish":
            bmc = RedfishBmc.from_options(self.target.options["redfish"])
            RedfishPower(bmc, where=self.target.hostname, fence=self.target.fence).power(action)
            return
        if self.ipmi:
            ipmi_power(self.ipmi, action, where=self.target.hostname)
            return
        if action == "on":
            # Without a BMC, "on" can only mean "is it up?": a node that answers SSH is on.
            try:
                with self._session():
                    return
            except DriverError as exc:
                if exc.permanent:
                    raise
                raise DriverError(f"{exc.message}; without driver_options.ipmi the ssh driver "
                                  "cannot power the node on", permanent=False) from None
        command = self.reboot_command if action == "reboot" else self.poweroff_command
        if self.target.fence is not None:
            command = (f"sh -c {shlex.quote(_FENCE_CHECK)} _ {_FENCE_DIR} "
                       f"{int(self.target.fence.token)} {command}")
        if self.sudo:
            command = f"sudo -n {command}"
        lines: list[str] = []
        with self._session() as transport:
            status, tail = self._exec(transport, command, stdin=b"", on_line=lines.append,
                                      timeout_s=60, label=f"power {action}")
        if self.target.fence is not None and status == FENCED_EXIT_STATUS:
            raise ExecutionStopped(f"{self.target.hostname}: power {action}: a newer execution "
                                   "holds the node")
        # None: the node dropped the connection while going down, which is the acknowledgement.
        if status not in (None, 0):
            raise DriverError(f"{self.target.hostname}: {command!r} exited {status}: "
                              f"{' / '.join(tail[-3:]) or 'no output'}", permanent=True)

    def health(self) -> HealthReport:
        lines: list[str] = []
        with self._session() as transport:
            command = (f"sh -c {shlex.quote(_HEALTH_COMMAND)} _ {shlex.quote(self.nvidia_smi)} "
                       f"{NO_NVIDIA_SMI_STATUS} {_NVIDIA_QUERY}")
            status, _ = self._exec(transport, command, stdin=b"", on_line=lines.append,
                                   timeout_s=60, label="health")
        raw = "\n".join(lines)
        if status is None:
            raise DriverError(f"{self.target.hostname}: connection lost during the health check",
                              permanent=False)
        if status == NO_NVIDIA_SMI_STATUS:
            return HealthReport(gpus=(), raw="nvidia-smi not found: no NVIDIA GPU driver is "
                                              "installed on this host")
        if status != 0:
            # nvidia-smi is there but cannot talk to the driver (exit 9) or to a GPU: no GPUs
            # usable, and its own words tell the operator why.
            return HealthReport(gpus=(), raw=f"nvidia-smi failed (exit {status}): {raw}".strip())
        return HealthReport(gpus=parse_nvidia_smi(raw), raw=raw)

    # --- SSH plumbing ------------------------------------------------------------------------
    @contextmanager
    def _session(self) -> Iterator[paramiko.Transport]:
        transport = self._connect()
        try:
            yield transport
        finally:
            transport.close()

    def _connect(self) -> paramiko.Transport:
        where = f"{self.target.hostname} ({self.host}:{self.port})"
        try:
            sock = socket.create_connection((self.host, self.port), timeout=self.connect_timeout_s)
        except socket.gaierror as exc:
            permanent = exc.errno in (socket.EAI_NONAME, getattr(socket, "EAI_NODATA", None))
            raise DriverError(f"{where}: cannot resolve address: {exc.strerror}",
                              permanent=permanent) from None
        except TimeoutError:
            raise DriverError(f"{where}: TCP connect timed out after {self.connect_timeout_s:g}s",
                              permanent=False) from None
        except OSError as exc:
            raise DriverError(f"{where}: cannot connect: {exc.strerror or exc}",
                              permanent=False) from None
        transport = paramiko.Transport(sock)
        try:
            transport.banner_timeout = self.connect_timeout_s
            transport.handshake_timeout = self.connect_timeout_s
            transport.auth_timeout = self.auth_timeout_s
            self._prefer_pinned_key_types(transport)
            try:
                transport.start_client(timeout=self.connect_timeout_s)
            except (paramiko.SSHException, EOFError, OSError) as exc:
                raise DriverError(f"{where}: SSH handshake failed: {exc or type(exc).__name__}",
                                  permanent=False) from None
            if not (transport.is_active() and transport.initial_kex_done):
                # start_client returns quietly when its timeout passes mid-negotiation.
                raise DriverError(f"{where}: SSH handshake did not complete within "
                                  f"{self.connect_timeout_s:g}s", permanent=False)
            self._verify_host_key(transport.get_remote_server_key(), where)
            key = self._load_private_key()
            try:
                transport.auth_publickey(self.user, key)
            except paramiko.AuthenticationException:
                raise DriverError(f"{where}: the node refused our key for user {self.user!r} "
                                  "(is its public key in authorized_keys?)", permanent=True) from None
            except (paramiko.SSHException, EOFError, OSError) as exc:
                raise DriverError(f"{where}: authentication did not complete: "
                                  f"{exc or type(exc).__name__}", permanent=False) from None
        except BaseException:
            transport.close()
            raise
        return transport

    def _prefer_pinned_key_types(self, transport: paramiko.Transport) -> None:
        """Ask the server for the host key type we pinned, so a multi-key host shows that one."""
        pinned = [t for t, _ in self.pins if t]
        if not pinned:
            return
        options = transport.get_security_options()
        wanted: list[str] = []
        for key_type in pinned:
            wanted += ["rsa-sha2-512", "rsa-sha2-256", "ssh-rsa"] if key_type == "ssh-rsa" else [key_type]
        available = list(options.key_types)
        first = [t for t in wanted if t in available]
        if first:
            options.key_types = first + [t for t in available if t not in first]

    def _verify_host_key(self, key: paramiko.PKey, where: str) -> None:
        presented = f"{key.get_name()} {_fingerprint(key.asbytes())}"
        if not self.pins:
            raise DriverError(
                f"{where}: no pinned host key for this node; it presented {presented}. Verify "
                "that fingerprint out of band (console: ssh-keygen -lf /etc/ssh/ssh_host_*_key.pub) "
                "and set driver_options.host_key", permanent=True)
        fingerprint = _fingerprint(key.asbytes())
        for _key_type, pin in self.pins:
            if pin == fingerprint:
                return
        pinned = ", ".join(p for _, p in self.pins)
        raise DriverError(
            f"{where}: HOST KEY MISMATCH: the node presented {presented} but {pinned} is pinned. "
            "Someone may be intercepting the connection, or the node was reinstalled; verify the "
            "new key out of band before updating driver_options.host_key", permanent=True)

    def management_public_key(self) -> str:
        """The public line of the key this driver logs in with: what an imaging engine installs
        for Trainyard's management user."""
        key = self._load_private_key()
        return f"{key.get_name()} {key.get_base64()}"

    def _load_private_key(self) -> paramiko.PKey:
        text = self._private_key_text
        if not text and self._private_key_file:
            try:
                text = Path(self._private_key_file).read_text()
            except OSError as exc:
                raise DriverError(f"cannot read the SSH private key file {self._private_key_file}: "
                                  f"{exc.strerror}", permanent=True) from None
        if not text:
            raise DriverError(f"{self.target.hostname}: no SSH private key configured "
                              "(private_key or private_key_file)", permanent=True)
        return load_private_key(text, self._passphrase)

    def _exec(self, transport: paramiko.Transport, command: str, *, stdin: bytes,
              on_line: LineCallback, timeout_s: float, label: str) -> tuple[int | None, list[str]]:
        """Runs ``command``; streams merged output lines. Returns (exit status or None, tail)."""
        where = self.target.hostname
        try:
            channel = transport.open_session(timeout=self.connect_timeout_s)
        except (paramiko.SSHException, EOFError, OSError) as exc:
            raise DriverError(f"{where}: cannot open an SSH session: {exc or type(exc).__name__}",
                              permanent=False) from None
        tail: deque[str] = deque(maxlen=OUTPUT_TAIL_LINES)

        def emit(raw: bytes) -> None:
            line = raw.decode("utf-8", errors="replace").rstrip("\r")
            tail.append(line)
            on_line(line)

        deadline = time.monotonic() + timeout_s
        pending = b""
        try:
            channel.set_combine_stderr(True)
            channel.exec_command(command)
            if stdin:
                channel.sendall(stdin)
            channel.shutdown_write()
            while True:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise DriverError(f"{where}: {label} did not finish within {timeout_s:g}s",
                                      permanent=False)
                if self.target.fence is not None and self.target.fence.cancelled:
                    self._cancel_remote(transport)
                    raise ExecutionStopped(f"{where}: {label} cancelled (the claim was lost); "
                                           "its process group was killed")
                readable, _, _ = select.select([channel], [], [], min(remaining, 0.5))
                if not readable:
                    if not transport.is_active():
                        return None, list(tail)
                    continue
                data = channel.recv(65536)
                if not data:
                    break
                pending += data
                *complete, pending = pending.split(b"\n")
                for raw in complete:
                    emit(raw)
            if pending:
                emit(pending)
            if not channel.status_event.wait(max(0.1, min(deadline - time.monotonic(), 30))):
                return None, list(tail)
            status = channel.recv_exit_status()
            return (None if status == -1 else status), list(tail)
        except (paramiko.SSHException, EOFError, OSError) as exc:
            if not transport.is_active():
                return None, list(tail)
            raise DriverError(f"{where}: SSH error while running {label}: "
                              f"{exc or type(exc).__name__}", permanent=False) from None
        finally:
            channel.close()

    def _cancel_remote(self, transport: paramiko.Transport) -> None:
        """Kills the process group of this execution's script on the node (best effort: the
        node's guard stops it anyway when a newer execution arrives)."""
        prefix = "sudo -n " if self.sudo else ""
        command = (f"{prefix}sh -c {shlex.quote(_CANCEL_COMMAND)} _ {_FENCE_DIR} "
                   f"{int(self.target.fence.token)}")
        try:
            channel = transport.open_session(timeout=self.connect_timeout_s)
            try:
                channel.exec_command(command)
                channel.status_event.wait(10)
            finally:
                channel.close()
        except (paramiko.SSHException, EOFError, OSError):
            logger.warning("could not cancel %s on %s", self.target.fence.execution,
                           self.target.hostname)


# --- helpers (pure) ----------------------------------------------------------------------------
def load_private_key(text: str, passphrase: str | None = None) -> paramiko.PKey:
    """A paramiko key from OpenSSH or PEM text. Errors never echo the key."""
    data = text.encode()
    password = passphrase.encode() if passphrase else None
    try:
        try:
            loaded = serialization.load_ssh_private_key(data, password=password)
        except ValueError:
            loaded = serialization.load_pem_private_key(data, password=password)
    except (ValueError, TypeError) as exc:
        hint = "wrong or missing passphrase?" if "encrypt" in str(exc).lower() else "not a key"
        raise DriverError(f"the SSH private key cannot be read ({hint})", permanent=True) from None
    if isinstance(loaded, ed25519.Ed25519PrivateKey):
        key_class = paramiko.Ed25519Key
    elif isinstance(loaded, rsa.RSAPrivateKey):
        key_class = paramiko.RSAKey
    elif isinstance(loaded, ec.EllipticCurvePrivateKey):
        key_class = paramiko.ECDSAKey
    else:
        raise DriverError("the SSH private key has an unsupported type (use ed25519, ECDSA or RSA)",
                          permanent=True)
    try:
        return key_class.from_private_key(io.StringIO(text), password=passphrase)
    except (paramiko.SSHException, ValueError):
        raise DriverError("the SSH private key cannot be read", permanent=True) from None


def parse_nvidia_smi(csv_text: str) -> tuple[GpuReading, ...]:
    """Rows of ``nvidia-smi --query-gpu=<_NVIDIA_QUERY> --format=csv,noheader,nounits``."""
    gpus = []
    for row in csv_text.splitlines():
        if not row.strip():
            continue
        fields = [f.strip() for f in row.split(",")]
        if len(fields) < 5:
            raise DriverError(f"unexpected nvidia-smi output: {row!r}", permanent=False)
        index, name, temperature, ecc, memory = fields[:5]
        gpus.append(GpuReading(
            index=int(index), name=name,
            temperature_c=_number(temperature, float, float("nan")),
            ecc_errors=_number(ecc, int, 0),  # "[N/A]" / "[Not Supported]": ECC off or absent
            memory_total_mib=_number(memory, int, None),
        ))
    return tuple(gpus)


def _number(text: str, kind, missing):
    try:
        return kind(float(text))
    except ValueError:
        return missing


def _parse_pins(value) -> list[tuple[str | None, str]]:
    """[(key type or None, "SHA256:…")] from public key lines and/or fingerprints."""
    if not value:
        return []
    entries = [value] if isinstance(value, str) else list(value)
    pins: list[tuple[str | None, str]] = []
    for entry in entries:
        for line in str(entry).splitlines():
            tokens = line.split()
            if not tokens or tokens[0].startswith("#"):
                continue
            if tokens[0].startswith("SHA256:"):
                pins.append((None, tokens[0].rstrip("=")))
                continue
            for i, token in enumerate(tokens[:-1]):
                if token.startswith(("ssh-", "ecdsa-sha2-")):
                    try:
                        blob = base64.b64decode(tokens[i + 1], validate=True)
                    except ValueError:
                        break
                    pins.append((token, _fingerprint(blob)))
                    break
            else:
                raise DriverError(f"cannot read pinned host key {line[:60]!r}: expected "
                                  "'ssh-ed25519 AAAA…' or 'SHA256:…'", permanent=True)
    return pins


def host_key_fingerprints(value) -> tuple[str, ...]:
    """The pinned host key(s) as customers compare them at their first login: "ED25519
    SHA256:…" (the type where the pin is a key line); () when nothing readable is pinned."""
    try:
        pins = _parse_pins(value)
    except DriverError:
        return ()
    return tuple(f"{_KEY_TYPE_LABELS.get(kind, kind.upper())} {fp}" if kind else fp
                 for kind, fp in pins)


_KEY_TYPE_LABELS = {"ssh-ed25519": "ED25519", "ssh-rsa": "RSA", "ecdsa-sha2-nistp256": "ECDSA",
                    "ecdsa-sha2-nistp384": "ECDSA", "ecdsa-sha2-nistp521": "ECDSA"}


def _fingerprint(blob: bytes) -> str:
    return "SHA256:" + base64.b64encode(hashlib.sha256(blob).digest()).decode().rstrip("=")


def staged_script(script: str, env: Mapping[str, str], *, token: int | None) -> str:
    """What ``run`` sends to the node: the environment's exports, the fence guard
    (``stack/sh/fence_guard.sh``, under its header) when the execution is fenced, the script."""
    staged = _exports(env)
    if token is not None:
        first_line = staged.count("\n") + fence_guard(token, first_line=0).count("\n") + 1
        staged += fence_guard(token, first_line=first_line)
    staged += script
    return staged if staged.endswith("\n") else staged + "\n"


def fence_guard(token: int, *, first_line: int) -> str:
    """The guard of a fenced script, ``first_line`` being where the script proper starts."""
    return assignments({"TRAINYARD_FENCE_TOKEN": token, "TRAINYARD_FENCE_SCRIPT_LINE": first_line,
                        "TRAINYARD_FENCED_STATUS": FENCED_EXIT_STATUS,
                        "TRAINYARD_RETRY_STATUS": RETRY_EXIT_STATUS}) + body("fence_guard")


def _exports(env: Mapping[str, str]) -> str:
    lines = []
    for key, value in env.items():
        if not _ENV_NAME.match(key):
            raise DriverError(f"invalid environment variable name {key!r}", permanent=True)
        lines.append(f"export {key}={shlex.quote(str(value))}\n")
    return "".join(lines)


def _last(result: RunResult) -> str:
    return result.output_tail[-1] if result.output_tail else "no output"


def _deploy_script(os_id: str, version: str, packages: tuple[str, ...], *, variant: str = "",
                   install: bool = True) -> str:
    return node_script("deploy_os", values={
        "TRAINYARD_OS_ID": os_id, "TRAINYARD_OS_VERSION": version, "TRAINYARD_OS_VARIANT": variant,
        "TRAINYARD_APT_PACKAGES": " ".join(packages), "TRAINYARD_INSTALL": "1" if install else "0",
        "TRAINYARD_RETRY_STATUS": RETRY_EXIT_STATUS})
