"""Customer SSH keys on a two-host cluster of real sshd test hosts, through the ssh driver.

Each host is an sshd on loopback (tests/provisioning/sshd.py) whose sessions get their own
``TRAINYARD_ROOT`` and a fake ``nvidia-smi`` (see test_pipeline_ssh.py for why). Besides the
driver's key, each sshd reads ``$TRAINYARD_ROOT/etc/trainyard/authorized_keys`` of that host:
the file the access step installs (on a real node an sshd drop-in names
``/etc/trainyard/authorized_keys``). A customer's fresh ed25519 key, added through the service,
logs in to every host after handover with paramiko; a key removed while the servers are active
is refused once the day-2 sync run has run.
"""

import io
import re
import stat

import paramiko
import pytest

from portal.catalog.models import NetworkOption, NvmeOption, ServerSKU
from portal.orders.services import order_place
from portal.orders.states import OrderState
from portal.quotes.configuration import Configuration
from portal.quotes.services import quote_create
from provisioning.approvals import order_approve
from provisioning.fulfilment import order_submit
from provisioning.models import ProvisioningRun
from provisioning.selectors import order_access
from provisioning.services import node_enrol
from provisioning.ssh_keys import installed_keys, ssh_key_add, ssh_key_remove
from provisioning.stack.packages import TEST_HOST_PACKAGES
from provisioning.states import STEPS, RunKind, RunStatus
from provisioning.transitions import node_transition
from tests.accounts.ssh_keygen import private_key, private_text, public_line
from tests.conftest import missing_service
from tests.factories import OrganisationFactory, member_of, staff
from tests.provisioning.acceptance.test_cluster_ssh import drive_until_done
from tests.provisioning.sshd import SshdUnavailable, start_sshd
from tests.provisioning.stack.venv_cache import link_cached_venv
from tests.provisioning.test_pipeline_ssh import FAKE_NVIDIA_SMI, _os_image, drive

SKU = "2x-l4-24gb"
HOSTNAMES = ("l4-keys-a", "l4-keys-b")  # ranks 0 and 1 (hostname order)


@pytest.fixture(scope="module")
def cluster_hosts(tmp_path_factory):
    hosts = []
    try:
        for name in HOSTNAMES:
            base = tmp_path_factory.mktemp(name)
            (base / "bin").mkdir()
            (base / "root").mkdir()
            smi = base / "bin" / "nvidia-smi"
            smi.write_text(FAKE_NVIDIA_SMI.format(count=2))
            smi.chmod(0o755)
            path = f"{base / 'bin'}:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
            host = start_sshd(base / "sshd", env={"PATH": path, "TRAINYARD_ROOT": str(base / "root")},
                              authorized_keys_files=(str(base / "root/etc/trainyard/authorized_keys"),))
            host.hostname, host.trainyard_root = name, base / "root"
            link_cached_venv(host.trainyard_root, TEST_HOST_PACKAGES)  # the test host's stack
            host.key_file = base / "id_ed25519"
            host.key_file.write_text(host.client_key_pem)
            host.key_file.chmod(0o600)
            hosts.append(host)
    except SshdUnavailable as exc:
        missing_service(f"this test needs real sshd test hosts: {exc}")
    try:
        yield hosts
    finally:
        for host in hosts:
            host.stop()


def _enrol(hosts):
    operator, sku = staff("operator"), ServerSKU.objects.get(slug=SKU)
    return [node_transition(
        node=node_enrol(by=operator, sku=sku, hostname=h.hostname,
                        management_address=f"{h.host}:{h.port}", fabric_address=h.host, driver="ssh",
                        fabric_group="keys-f1",
                        driver_options={"host_key": h.host_public_key, "private_key_file": str(h.key_file),
                                        "login_user": h.user, "connect_timeout_s": 5, "test_host": True}),
        name="accept", by=operator, note="test fixture: a CPU sshd host")
            for h in hosts]


def _approved_cluster(org, customer, nodes, storage_provider):
    # With a bucket: cluster acceptance round-trips its checkpoint through it (every node reads it).
    config = Configuration(sku=nodes[0].sku, nvme=NvmeOption.objects.order_by("size_tb").first(),
                           network=NetworkOption.objects.get(slug="eth-100g"), node_count=2,
                           storage_provider=storage_provider, storage_tb=1)
    order = order_place(quote=quote_create(organisation=org, by=customer, configuration=config),
                        by=customer)
    order_submit(order=order, by=customer)
    order.refresh_from_db()
    if order.state == OrderState.PENDING_APPROVAL:
        order_approve(order=order, by=staff("approver"), node_ids=[n.pk for n in nodes])
    order.refresh_from_db()
    assert order.state == OrderState.APPROVED
    return order


def _logs_in(node_access, key) -> bool:
    """Logs in as the customer would, with the ssh line the server page shows."""
    handover = node_access.handover
    client = paramiko.SSHClient()
    client.set_missing_host_key_policy(paramiko.AutoAddPolicy())
    try:
        client.connect(handover.ssh_host, port=handover.ssh_port, username=handover.ssh_user,
                       pkey=paramiko.Ed25519Key.from_private_key(io.StringIO(private_text(key))),
                       look_for_keys=False, allow_agent=False, timeout=10, auth_timeout=10)
        _, stdout, _ = client.exec_command("echo logged-in")
        return stdout.read().decode().strip() == "logged-in"
    except paramiko.AuthenticationException:
        return False
    finally:
        client.close()


def _sync(order) -> None:
    run = ProvisioningRun.objects.filter(order=order, kind=RunKind.SYNC_KEYS).order_by("-pk").first()
    assert drive(run) == ["access:succeeded"] * 2
    run.refresh_from_db()
    assert run.status == RunStatus.SUCCEEDED


@pytest.mark.torch
@pytest.mark.django_db
def test_the_customers_key_logs_in_to_every_node_and_a_removed_key_is_refused(
        catalog, cluster_hosts, settings, storage_provider):
    settings.PROVISIONING_OS_IMAGE = _os_image()
    settings.PROVISIONING_STEP_LEASE_S = 1800  # see the ssh_node fixture: no renewal in-test
    org = OrganisationFactory(slug="keys-lab", name="Keys Lab")
    alice = member_of(org)
    laptop = private_key("ssh-ed25519")
    laptop_key = ssh_key_add(public_key=public_line(laptop), name="laptop", user=alice, by=alice)
    order = _approved_cluster(org, alice, _enrol(cluster_hosts), storage_provider)

    # Cluster acceptance waits (transient retries) until both nodes' stacks are in.
    outcomes = drive_until_done(ProvisioningRun.objects.get(order=order, kind=RunKind.PROVISION))

    assert outcomes.count("handover:succeeded") == 2, outcomes
    assert sum(o.endswith(":succeeded") for o in outcomes) == 2 * len(STEPS[RunKind.PROVISION])
    order.refresh_from_db()
    assert order.state == OrderState.ACTIVE
    access = order_access(order)
    assert [(n.hostname, n.rank) for n in access.nodes] == [(HOSTNAMES[0], 0), (HOSTNAMES[1], 1)]
    for node, host in zip(access.nodes, cluster_hosts, strict=True):
        assert node.ssh_command == f"ssh -p {host.port} {host.user}@127.0.0.1"
        installed = host.trainyard_root / "etc/trainyard/authorized_keys"
        assert stat.S_IMODE(installed.stat().st_mode) == 0o600
        assert laptop_key.public_key in installed.read_text()
        env_sh = (host.trainyard_root / "etc/trainyard/env.sh").read_text()
        assert re.search(rf"\bNODE_RANK=\"?{node.rank}\"?$", env_sh, re.M), env_sh
        assert _logs_in(node, laptop), host.log()[-2000:]
    assert installed_keys(order).fingerprints == (laptop_key.fingerprint,)

    # Day 2: a colleague's key is added, the laptop's removed; each change reaches both nodes.
    workstation = private_key("ssh-ed25519")
    ssh_key_add(public_key=public_line(workstation), name="workstation", organisation=org, by=alice)
    _sync(order)
    assert all(_logs_in(node, workstation) for node in access.nodes)
    ssh_key_remove(ssh_key=laptop_key, by=alice)
    _sync(order)
    for node, host in zip(access.nodes, cluster_hosts, strict=True):
        assert not _logs_in(node, laptop)
        assert _logs_in(node, workstation)
        installed = (host.trainyard_root / "etc/trainyard/authorized_keys").read_text()
        assert laptop_key.public_key not in installed
    assert [k.name for k in installed_keys(order).keys] == ["workstation"]
