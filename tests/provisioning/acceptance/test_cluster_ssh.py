"""A 2-node cluster over two real sshd test hosts (each its own TRAINYARD_ROOT), both declared
CPU test hosts, provisioned through the ssh driver from order to handover and day 2:

- the first node's acceptance waits for both stacks and for the second node's own checks, then
  one training job runs across them (one torchrun per host, gloo over loopback, world size 4);
  the checkpoint shards of both hosts meet in the order's bucket and each host reads all of
  them back;
- the customer's SSH key, added before the order, logs in to every node after handover with the
  ssh line the server page shows, and each node's env.sh has its own rank; a key added and one
  removed while the servers are active reach both nodes with the day-2 sync run.

Besides the driver's key, each sshd reads ``$TRAINYARD_ROOT/etc/trainyard/authorized_keys`` of
that host: the file the access step installs (on a real node an sshd drop-in names
``/etc/trainyard/authorized_keys``). A fake ``nvidia-smi`` on each session's PATH stands in for
the GPUs of the day-2 health check (see test_pipeline_ssh.py). One cluster serves both stories
because provisioning it (two bootstraps, a 4-rank training job) is the expensive part."""

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
from provisioning.fulfilment.approvals import order_approve
from provisioning.fulfilment.orders import order_submit
from provisioning.fulfilment.selectors import acceptance_report, order_access
from provisioning.fulfilment.ssh_keys import installed_keys, ssh_key_add, ssh_key_remove
from provisioning.inventory.services import node_enrol
from provisioning.models import ProvisioningRun, StepRun
from provisioning.pipeline import engine, runs
from provisioning.stack.packages import TEST_HOST_PACKAGES
from provisioning.states import STEPS, RunKind, RunStatus
from provisioning.storage.models import Bucket
from provisioning.transitions import node_transition
from tests.accounts.ssh_keygen import private_key, private_text, public_line
from tests.conftest import missing_service
from tests.factories import OrganisationFactory, member_of, staff
from tests.provisioning.sshd import SshdUnavailable, start_sshd
from tests.provisioning.stack.venv_cache import link_cached_tools, link_cached_venv
from tests.provisioning.test_pipeline_ssh import FAKE_NVIDIA_SMI, SKU, _os_image, drive

pytestmark = pytest.mark.torch
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
            link_cached_tools(host.trainyard_root)  # Trainyard's node tools (boto3)
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


def drive_until_done(run: ProvisioningRun, *, limit: int = 60) -> list[str]:
    """Runs queued steps in this process; a step waiting to retry (a backoff, or the cluster
    wait) is run again at the end of the queue with its time taken as elapsed (as the task's
    countdown would)."""
    queue, outcomes = list(runs.run_start(run_id=run.pk)), []
    while queue and len(outcomes) < limit:
        key = queue.pop(0)
        outcome = engine.step_execute(run_id=key[0], node_id=key[1], step=key[2])
        outcomes.append(f"{key[2]}:{outcome.status}")
        if outcome.status in ("retry", "waiting"):
            StepRun.objects.filter(run_id=key[0], node_id=key[1], step=key[2]).update(retry_at=None)
            queue.append(key)
        queue += outcome.next_steps
    return outcomes


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


@pytest.mark.django_db
def test_a_two_node_cluster_trains_across_both_hosts_and_the_customers_keys_log_in(
        cluster_hosts, catalog, settings, storage_provider, admin_s3):
    settings.PROVISIONING_OS_IMAGE = _os_image()
    settings.PROVISIONING_STEP_LEASE_S = 1800  # see the ssh_node fixture: no renewal in-test
    org = OrganisationFactory(slug="keys-lab", name="Keys Lab")
    alice = member_of(org)
    laptop = private_key("ssh-ed25519")
    laptop_key = ssh_key_add(public_key=public_line(laptop), name="laptop", user=alice, by=alice)
    nodes = _enrol(cluster_hosts)
    order = _approved_cluster(org, alice, nodes, storage_provider)
    run = ProvisioningRun.objects.get(order=order, kind=RunKind.PROVISION)

    outcomes = drive_until_done(run)

    order.refresh_from_db()
    assert order.state == OrderState.ACTIVE, (outcomes, order.failure_reason)
    assert outcomes.count("handover:succeeded") == 2, outcomes
    assert sum(o.endswith(":succeeded") for o in outcomes) == 2 * len(STEPS[RunKind.PROVISION])
    assert "acceptance:waiting" in outcomes  # the first node waited for the second's checks

    # One job trained across both hosts; the checkpoint shards of all 4 ranks met in the bucket.
    report = acceptance_report(order)
    assert report.passed and report.trained and report.test_host
    assert (report.nodes, report.world_size) == (2, 4)
    assert report.fsdp_losses[-1] < 0.5 * report.fsdp_losses[0]
    prefix = f"acceptance/run-{run.pk}/attempt-"
    keys = {o["Key"].rsplit("/", 1)[-1] for o in admin_s3.list_objects_v2(
        Bucket=Bucket.objects.get(order=order).name, Prefix=prefix)["Contents"]}
    assert {".metadata", "__0_0.distcp", "__1_0.distcp", "__2_0.distcp", "__3_0.distcp"} <= keys
    second = StepRun.objects.get(run=run, node=nodes[1], step="acceptance").result["report"]
    assert {c["name"]: c["status"] for c in second["checks"]}["training job"] == "skip"
    assert {c.node for c in report.checks if c.name == "NCCL all-reduce bus bandwidth"} == set(HOSTNAMES)

    # The customer's key logs in to every node with the ssh line shown; env.sh has each rank.
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
