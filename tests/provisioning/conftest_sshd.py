"""pytest plugin: a real sshd test host on loopback (see tests/provisioning/sshd.py).

Loaded for the whole suite by ``pytest_plugins`` in tests/conftest.py.
Without sshd the tests fail under CI=true and are skipped elsewhere (``missing_service``).
"""

import pytest

from provisioning.drivers.base import NodeTarget
from provisioning.drivers.ssh import SshDriver
from tests.conftest import missing_service
from tests.provisioning.sshd import SshdUnavailable, SshTestHost, start_sshd


@pytest.fixture(scope="session")
def sshd_host(tmp_path_factory) -> SshTestHost:
    try:
        base = tmp_path_factory.mktemp("sshd")
        # The node's own files (the fencing marker) go under a scratch root, not this host's /var.
        (base / "node-root").mkdir()
        host = start_sshd(base, env={"TRAINYARD_ROOT": str(base / "node-root")})
    except SshdUnavailable as exc:
        missing_service(f"this test needs a real sshd test host: {exc}")
    try:
        yield host
    finally:
        host.stop()


@pytest.fixture
def ssh_driver_for(sshd_host):
    """Builds an SshDriver for the test host; keyword arguments override its options."""

    def build(hostname: str = "sshd-test-node", address: str | None = None, fence=None,
              **options) -> SshDriver:
        base = {"host_key": sshd_host.host_public_key, "private_key": sshd_host.client_key_pem,
                "connect_timeout_s": 5, "auth_timeout_s": 5}
        base.update(options)
        return SshDriver(NodeTarget(hostname=hostname,
                                    address=address or f"{sshd_host.host}:{sshd_host.port}",
                                    gpu_count=0, options=base, fence=fence))

    return build
