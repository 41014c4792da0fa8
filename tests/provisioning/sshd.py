"""A real OpenSSH sshd test host on loopback, for the ssh driver's tests.

`start_sshd(tmp_dir)` generates an ed25519 host key and an ed25519 client key, writes its
own sshd_config (listen on 127.0.0.1 only, a free port, public-key auth only, no PAM) and
runs `/usr/sbin/sshd -D -e` as a subprocess. The client logs in as the user running the
tests, so scripts run with the same rights as the test process (root in CI containers).

Used by the `sshd_host` fixture in tests/provisioning/conftest_sshd.py.
"""

from __future__ import annotations

import base64
import getpass
import hashlib
import os
import shutil
import socket
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

SSHD_CANDIDATES = ("/usr/sbin/sshd", "/usr/local/sbin/sshd")


class SshdUnavailable(RuntimeError):
    """sshd is not installed or could not start on this machine."""


@dataclass
class SshTestHost:
    host: str
    port: int
    user: str
    client_key_pem: str  # OpenSSH private key, as the caller would hand it to the driver
    client_public_key: str  # "ssh-ed25519 AAAA…"
    host_public_key: str  # "ssh-ed25519 AAAA…": what an operator pins for the node
    root: Path
    proc: subprocess.Popen = field(repr=False)

    @property
    def host_fingerprint(self) -> str:
        return fingerprint_sha256(self.host_public_key)

    def log(self) -> str:
        path = self.root / "sshd.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)


def sshd_path() -> str | None:
    found = shutil.which("sshd")
    if found:
        return found
    return next((p for p in SSHD_CANDIDATES if os.access(p, os.X_OK)), None)


def fingerprint_sha256(public_key_line: str) -> str:
    blob = base64.b64decode(public_key_line.split()[1])
    return "SHA256:" + base64.b64encode(hashlib.sha256(blob).digest()).decode().rstrip("=")


def generate_ed25519() -> tuple[str, str]:
    """(OpenSSH private key text, "ssh-ed25519 AAAA…" public key line)."""
    key = Ed25519PrivateKey.generate()
    private = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.OpenSSH, serialization.NoEncryption()
    ).decode()
    public = key.public_key().public_bytes(
        serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH
    ).decode()
    return private, public


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _write_secret(path: Path, text: str) -> None:
    path.write_text(text)
    path.chmod(0o600)


def start_sshd(root: Path, *, env: dict[str, str] | None = None, timeout: float = 15.0,
               authorized_keys_files: tuple[str, ...] = (),
               user_keys: dict[str, str] | None = None,
               host_key: tuple[str, str] | None = None, port: int | None = None) -> SshTestHost:
    """Starts sshd; ``env`` is set in every session (``SetEnv``), e.g. a PATH with fake tools.
    ``authorized_keys_files`` are read too, after the driver's own (e.g. the customer keys the
    pipeline installs under the host's scratch root). ``user_keys``: other accounts that may log
    in, each with the only keys file read for it (a customer account, as the access step's sshd
    drop-in makes it on a real node). ``host_key`` (private, public): the host key to present
    (default: a new one); ``port``: the port to listen on (default: a free one)."""
    binary = sshd_path()
    if binary is None:
        raise SshdUnavailable("sshd is not installed (apt-get install openssh-server)")
    root.mkdir(parents=True, exist_ok=True)
    if os.geteuid() == 0:
        # As root, sshd insists on its privilege-separation directory.
        Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)

    host_private, host_public = host_key or generate_ed25519()
    client_private, client_public = generate_ed25519()
    _write_secret(root / "ssh_host_ed25519_key", host_private)
    (root / "ssh_host_ed25519_key.pub").write_text(host_public + "\n")
    _write_secret(root / "authorized_keys", client_public + "\n")

    user = getpass.getuser()
    last_error = ""
    fixed_port = port
    for _ in range(3):  # the port we picked may be taken between bind() and sshd's listen()
        port = fixed_port or free_port()
        config = root / "sshd_config"
        config.write_text("\n".join([
            f"Port {port}",
            "ListenAddress 127.0.0.1",
            f"HostKey {root / 'ssh_host_ed25519_key'}",
            f"PidFile {root / 'sshd.pid'}",
            f"AuthorizedKeysFile {' '.join([str(root / 'authorized_keys'), *authorized_keys_files])}",
            f"AllowUsers {' '.join([user, *(user_keys or {})])}",
            "UsePAM no",
            "StrictModes no",
            "PubkeyAuthentication yes",
            "PasswordAuthentication no",
            "KbdInteractiveAuthentication no",
            "PermitRootLogin prohibit-password",
            "AllowTcpForwarding no",
            "X11Forwarding no",
            "PrintMotd no",
            "UseDNS no",
            "LoginGraceTime 20",
            "MaxStartups 50",
            "Subsystem sftp internal-sftp",
            "LogLevel VERBOSE",
            *([f"SetEnv {' '.join(f'{k}={v}' for k, v in env.items())}"] if env else []),
            *[f"Match User {name}\n    AuthorizedKeysFile {path}"
              for name, path in (user_keys or {}).items()],
            "",
        ]))
        check = subprocess.run([binary, "-t", "-f", str(config)], capture_output=True, text=True)
        if check.returncode != 0:
            raise SshdUnavailable(f"sshd rejected its test config: {check.stderr.strip()}")
        log = (root / "sshd.log").open("w")
        proc = subprocess.Popen(
            [binary, "-D", "-e", "-f", str(config)], stdout=log, stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
        )
        test_host = SshTestHost(
            host="127.0.0.1", port=port, user=user, client_key_pem=client_private,
            client_public_key=client_public, host_public_key=host_public, root=root, proc=proc,
        )
        if _wait_for_banner(test_host, timeout):
            return test_host
        last_error = test_host.log()[-2000:]
        test_host.stop()
    raise SshdUnavailable(f"sshd did not start on loopback:\n{last_error}")


def _wait_for_banner(test_host: SshTestHost, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if test_host.proc.poll() is not None:
            return False
        try:
            with socket.create_connection((test_host.host, test_host.port), timeout=1) as sock:
                sock.settimeout(2)
                if sock.recv(64).startswith(b"SSH-2.0-"):
                    return True
        except OSError:
            pass
        time.sleep(0.05)
    return False
