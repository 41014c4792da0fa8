"""Hand-back end to end: two tenants, one after the other, on one real sshd test host.

The host is this machine, reached over SSH on loopback, with a scratch ``TRAINYARD_ROOT`` for
Trainyard's directories and a real customer account (created for the test, its home in a temp
dir) that logs in with the keys the access step installs. Its sessions' PATH has the machine's
stock ``python3`` (no boto3): the deploy step installs Trainyard's node tools for real and the
termination copies with them. Tenant A orders with a bucket, writes a checkpoint, a file in its
home and in /tmp, a crontab line and a background process, over SSH with its own key; then
terminates. Tenant B then orders the same node. Run for a node without data devices ("files")
and for one whose data device is a loop device (XFS, wiped by discard)."""

from __future__ import annotations

import base64
import io
import os
import pwd
import shutil
import subprocess
import tempfile
import uuid
from datetime import UTC, datetime
from pathlib import Path

import paramiko
import pytest
from botocore.exceptions import ClientError
from django.core import mail

from portal.accounts.services import ssh_key_add
from portal.accounts.tasks import staff_notify_task
from portal.catalog.models import NetworkOption, NvmeOption, ServerSKU
from portal.orders.models import Order
from portal.orders.services import order_place
from portal.orders.states import OrderState
from portal.quotes.configuration import Configuration
from portal.quotes.services import quote_create
from provisioning.fulfilment.approvals import order_approve
from provisioning.fulfilment.orders import order_request_termination, order_submit
from provisioning.inventory.services import node_enrol
from provisioning.models import NodeEvent, ProvisioningRun, StepRun
from provisioning.monitoring.health import node_accept_if_healthy
from provisioning.pipeline.selectors import runs_needing_attention
from provisioning.pipeline.services import run_retry_step
from provisioning.stack.packages import TEST_HOST_PACKAGES
from provisioning.states import STEPS, NodeState, RunKind
from provisioning.storage.models import Bucket, Credential
from provisioning.storage.s3ops import make_client
from tests.conftest import missing_service
from tests.factories import OrganisationFactory, member_of, staff
from tests.provisioning.sshd import SshdUnavailable, free_port, generate_ed25519, start_sshd
from tests.provisioning.stack.venv_cache import STOCK_PYTHON_PATH, link_cached_venv
from tests.provisioning.test_pipeline_ssh import _os_image, drive

SKU = "2x-l4-24gb"
pytestmark = [pytest.mark.torch, pytest.mark.django_db]


@pytest.fixture(scope="module")
def scratch():
    """A directory the customer account can reach (pytest's own temp dirs are private to root),
    outside /tmp (the hand-back removes the customer's files there): the node's scratch root and
    the account's home live under it."""
    if not os.access("/srv", os.W_OK):
        missing_service("the hand-back test keeps its test host under /srv: it must be writable")
    base = Path(tempfile.mkdtemp(prefix="trainyard-handback-", dir="/srv"))
    base.chmod(0o755)
    yield base
    shutil.rmtree(base, ignore_errors=True)


@pytest.fixture(scope="module")
def tenant_account(scratch):
    """A customer account of the test host: an unprivileged user, its home in ``scratch``."""
    if os.geteuid() != 0 or not shutil.which("useradd"):
        missing_service("the hand-back test creates a customer account: it needs root and useradd")
    name = f"ty{uuid.uuid4().hex[:8]}"
    subprocess.run(["useradd", "-m", "-d", str(scratch / name), "-s", "/bin/bash", name], check=True)
    subprocess.run(["usermod", "-p", "*", name], check=True)  # key login only, not "locked"
    try:
        yield name
    finally:
        subprocess.run(["pkill", "-KILL", "-u", name], check=False)
        subprocess.run(["crontab", "-r", "-u", name], check=False, capture_output=True)
        subprocess.run(["userdel", "-r", name], check=False, capture_output=True)


@pytest.fixture(scope="module")
def loop_device(tmp_path_factory):
    """A 320 MB sparse loop device standing in for a node's NVMe data device."""
    if os.geteuid() != 0 or not shutil.which("losetup") or not shutil.which("mkfs.xfs"):
        missing_service("the data-device hand-back needs root, losetup and mkfs.xfs (xfsprogs)")
    image = tmp_path_factory.mktemp("nvme") / "nvme0n1.img"
    with open(image, "wb") as fh:
        fh.truncate(320 * 1024 * 1024)
    done = subprocess.run(["losetup", "-f", "--show", str(image)], capture_output=True, text=True)
    if done.returncode != 0:
        missing_service(f"no loop device: {done.stderr.strip()}")
    device = done.stdout.strip()
    try:
        yield device
    finally:
        subprocess.run(f"umount {device} 2>/dev/null; losetup -d {device}", shell=True, check=False)


def _host(base: Path, tenant: str):
    root = base / "root"
    root.mkdir(parents=True)
    for reachable in (base, root):
        reachable.chmod(0o755)
    try:
        host = start_sshd(base / "sshd", env={"PATH": STOCK_PYTHON_PATH, "TRAINYARD_ROOT": str(root)},
                          user_keys={tenant: str(root / "etc/trainyard/authorized_keys")})
    except SshdUnavailable as exc:
        missing_service(f"this test needs a real sshd test host: {exc}")
    key_file = base / "id_ed25519"
    key_file.write_text(host.client_key_pem)
    key_file.chmod(0o600)
    host.key_file, host.trainyard_root, host.tenant = key_file, root, tenant
    link_cached_venv(root, TEST_HOST_PACKAGES)  # the stack's venv (torch): not what is tested
    return host


@pytest.fixture
def handback_host(tenant_account, scratch):
    host = _host(scratch / f"host-{uuid.uuid4().hex[:6]}", tenant_account)
    yield host
    host.stop()


def _enrol(host, *, devices=(), wipe_method="files"):
    node = node_enrol(
        by=staff("operator"), sku=ServerSKU.objects.get(slug=SKU), hostname=f"l4-hb-{uuid.uuid4().hex[:6]}",
        management_address=f"{host.host}:{host.port}", driver="ssh", nvme_devices=list(devices),
        wipe_method=wipe_method,
        driver_options={"host_key": host.host_public_key, "private_key_file": str(host.key_file),
                        "apt_packages": ["bash", "coreutils"], "connect_timeout_s": 30,
                        "test_host": True, "login_user": host.tenant})
    node_accept_if_healthy(node=node, by=staff("operator"))  # reachable; clean baseline recorded
    node.refresh_from_db()
    assert node.state == NodeState.READY and node.baseline_at is not None, (
        list(node.events.values_list("note", flat=True)),
        list(node.health_checks.values_list("problems", "raw")))
    return node


class Tenant:
    """A customer organisation with one SSH key, and its sessions on the node."""

    def __init__(self, slug: str, host):
        self.org = OrganisationFactory(slug=slug, name=slug.title())
        self.member = member_of(self.org)
        self.private_key, public = generate_ed25519()
        ssh_key_add(public_key=public, name=f"{slug} laptop", organisation=self.org)
        self.host = host

    def order(self, node, storage_provider=None) -> Order:
        storage = {"storage_provider": storage_provider, "storage_tb": 1} if storage_provider else {}
        config = Configuration(sku=node.sku, nvme=NvmeOption.objects.order_by("size_tb").first(),
                               network=NetworkOption.objects.get(slug="eth-1g"), **storage)
        order = order_place(quote=quote_create(organisation=self.org, by=self.member,
                                               configuration=config), by=self.member)
        order_submit(order=order, by=self.member)
        order.refresh_from_db()
        if order.state == OrderState.PENDING_APPROVAL:
            order_approve(order=order, by=staff("approver"), node_ids=[node.pk])
        return order

    def ssh(self, command: str) -> tuple[int, str]:
        """Runs ``command`` as the customer, over SSH with this tenant's own key."""
        client = paramiko.SSHClient()
        client.set_missing_host_key_policy(paramiko.AutoAddPolicy())
        key = paramiko.Ed25519Key.from_private_key(io.StringIO(self.private_key))
        client.connect(self.host.host, port=self.host.port, username=self.host.tenant, pkey=key,
                       allow_agent=False, look_for_keys=False, timeout=10, auth_timeout=10)
        try:
            _, stdout, stderr = client.exec_command(command, timeout=60)
            status = stdout.channel.recv_exit_status()
            return status, stdout.read().decode() + stderr.read().decode()
        finally:
            client.close()

    def locked_out(self) -> bool:
        try:
            self.ssh("true")
        except paramiko.AuthenticationException:
            return True
        return False


def provision(tenant: Tenant, node, storage_provider=None) -> Order:
    order = tenant.order(node, storage_provider)
    run = ProvisioningRun.objects.get(order=order, kind=RunKind.PROVISION)
    outcomes = drive(run)
    assert outcomes == [f"{s.name}:succeeded" for s in STEPS[RunKind.PROVISION]], \
        StepRun.objects.filter(run=run).exclude(error="").values_list("step", "error").first()
    order.refresh_from_db()
    assert order.state == OrderState.ACTIVE
    return order


def leave_traces(tenant: Tenant, checkpoint: bytes, name: str) -> None:
    """What a customer leaves: a checkpoint, a file in home and in /tmp, a crontab line and a
    process still running after the session."""
    step = f'"$TRAINYARD_ROOT/data/checkpoints/{name}"'
    status, out = tenant.ssh(
        f"mkdir -p {step} && echo {base64.b64encode(checkpoint).decode()} | base64 -d > {step}/model.pt"
        f" && echo private > ~/notes-{name}.txt && echo scratch > /tmp/{tenant.host.tenant}-{name}"
        f" && (echo '*/5 * * * * sleep 1' | crontab -)"
        f" && {{ setsid sleep 3600 </dev/null >/dev/null 2>&1 & }}")
    assert status == 0, out


def nothing_of_the_tenant_left(host, node) -> None:
    root, tenant = host.trainyard_root, host.tenant
    assert [p.name for p in (root / "etc/trainyard").iterdir()] == []
    left = list((root / "data").iterdir())
    assert left == [], _when_created(left, node)
    assert not list((root / "opt/trainyard/bin").iterdir())
    home = Path(pwd.getpwnam(tenant).pw_dir)
    assert sorted(p.name for p in home.iterdir()) == sorted(p.name for p in Path("/etc/skel").iterdir())
    assert not [p for p in Path("/tmp").iterdir() if p.name.startswith(tenant)]
    assert subprocess.run(["pgrep", "-u", tenant], capture_output=True).returncode == 1
    assert not Path(f"/var/spool/cron/crontabs/{tenant}").exists()
    node.refresh_from_db()
    assert node.state == NodeState.READY and node.order_id is None
    attest = NodeEvent.objects.filter(node=node, transition="attest").last()
    assert attest is not None and "nothing of the last tenant remains" in attest.note


def _when_created(paths: list[Path], node) -> str:
    """What a failure needs to say: when each leftover appeared against the node's steps (an
    intermittent failure here once found ``data/checkpoints`` after an attestation had passed)."""
    lines = [f"{p} changed {datetime.fromtimestamp(p.stat().st_ctime, UTC):%H:%M:%S.%f}"
             for p in paths]
    steps = (StepRun.objects.filter(node=node).order_by("started_at")
             .values_list("run__kind", "step", "status", "started_at", "finished_at"))
    lines += [f"{kind}/{step} {status} {started:%H:%M:%S.%f} → {finished:%H:%M:%S.%f}"
              for kind, step, status, started, finished in steps if started and finished]
    return "\n".join(lines)


def _refused(key_id: str, secret: str, endpoint: str, bucket: str) -> str:
    s3 = make_client("s3", endpoint_url=endpoint, region="us-east-1", access_key=key_id,
                     secret_key=secret)
    with pytest.raises(ClientError) as refused:
        s3.list_objects_v2(Bucket=bucket)
    return refused.value.response["Error"]["Code"]


def _object(admin_s3, bucket: str, key: str) -> bytes:
    return admin_s3.get_object(Bucket=bucket, Key=key)["Body"].read()


def test_two_tenants_on_a_node_without_data_devices(
        handback_host, catalog, settings, storage_provider, admin_s3, embedded_s3, monkeypatch,
        django_capture_on_commit_callbacks):
    """A terminates with its checkpoint kept; the copy fails first (the bucket's endpoint down):
    A is locked out at once, the node stays out of stock, operators get the run's link, and a
    staff retry finishes the hand-back. B then gets a node with nothing of A's, and no bucket."""
    settings.PROVISIONING_OS_IMAGE = _os_image()
    settings.PROVISIONING_STEP_LEASE_S = 1800
    settings.PROVISIONING_STEP_MAX_ATTEMPTS = 1  # the failed copy fails the step at once
    settings.SITE_URL = "http://portal.example"
    host = handback_host
    node = _enrol(host)
    a = Tenant("tenant-a", host)
    order = provision(a, node, storage_provider)
    # The node tools were installed for real, with the host's stock python3 (no boto3 there).
    assert (host.trainyard_root / "opt/trainyard/tools/.trainyard-requirements").exists()
    assert subprocess.run(["/usr/bin/python3", "-c", "import boto3"]).returncode != 0
    checkpoint = os.urandom(50_000)
    leave_traces(a, checkpoint, "step-1")
    bucket = Bucket.objects.get(order=order)
    key = Credential.objects.get(bucket=bucket, active=True, read_only=False)
    key_id, secret, endpoint = key.access_key_id, key.secret, bucket.endpoint

    Bucket.objects.filter(pk=bucket.pk).update(endpoint=f"http://127.0.0.1:{free_port()}")
    operator = staff("operator")
    operator.email = "olga@example.com"
    operator.save()
    monkeypatch.setattr(staff_notify_task, "delay", lambda *args: staff_notify_task(*args))
    with django_capture_on_commit_callbacks(execute=True):
        order_request_termination(order=order, by=a.member)
        run = ProvisioningRun.objects.get(order=order, kind=RunKind.TERMINATE)
        outcomes = drive(run)
    assert outcomes == ["revoke_access:succeeded", "retain_data:failed"]
    assert a.locked_out()  # access ended before the copy, whatever became of the copy
    node.refresh_from_db()
    order.refresh_from_db()
    assert node.state == NodeState.FAILED_WIPE and order.state == OrderState.TERMINATING
    assert run in runs_needing_attention()
    [told] = [m for m in mail.outbox if m.subject.startswith("[Trainyard staff] Termination")]
    assert "olga@example.com" in told.to  # every operator hears it
    assert f"http://portal.example/ops/runs/{run.pk}/" in told.body
    assert (host.trainyard_root / "data/checkpoints/step-1/model.pt").read_bytes() == checkpoint

    Bucket.objects.filter(pk=bucket.pk).update(endpoint=endpoint)  # the endpoint is back
    run_retry_step(run=run, by=operator)
    assert drive(run) == [f"{s.name}:succeeded" for s in STEPS[RunKind.TERMINATE][1:]]
    order.refresh_from_db()
    assert order.state == OrderState.TERMINATED
    assert _object(admin_s3, bucket.name, f"checkpoints/{node.hostname}/step-1/model.pt") == checkpoint
    assert _refused(key_id, secret, endpoint, bucket.name) == "InvalidAccessKeyId"
    nothing_of_the_tenant_left(host, node)

    b = Tenant("tenant-b", host)
    provision(b, node)  # no bucket: acceptance must not read A's old credentials
    assert a.locked_out()
    status, out = b.ssh('ls -A ~; echo ---; ls -A "$TRAINYARD_ROOT/data" "$TRAINYARD_ROOT/etc/trainyard"')
    assert status == 0, out
    assert "notes-step-1" not in out and "s3" not in out and "step-1" not in out


def test_two_tenants_on_a_node_with_a_data_device(
        tenant_account, loop_device, scratch, catalog, settings, storage_provider, admin_s3):
    """The data device is XFS on /data while a tenant runs; the hand-back discards it (it reads
    back zeros) and B's later termination copies B's checkpoint only."""
    settings.PROVISIONING_OS_IMAGE = _os_image()
    settings.PROVISIONING_STEP_LEASE_S = 1800
    host = _host(scratch / f"host-{uuid.uuid4().hex[:6]}", tenant_account)
    try:
        node = _enrol(host, devices=[loop_device], wipe_method="discard")
        a = Tenant("tenant-c", host)
        order_a = provision(a, node, storage_provider)
        data = host.trainyard_root / "data"
        assert subprocess.run(["mountpoint", "-q", str(data)]).returncode == 0  # XFS on the device
        leave_traces(a, b"A" * 40_000, "step-1")
        order_request_termination(order=order_a, by=a.member)
        drive(ProvisioningRun.objects.get(order=order_a, kind=RunKind.TERMINATE))
        assert subprocess.run(["mountpoint", "-q", str(data)]).returncode != 0
        with open(loop_device, "rb") as device:  # discarded: nothing of A's checkpoint anywhere
            while chunk := device.read(16 * 1024 * 1024):
                assert b"A" * 4096 not in chunk
        nothing_of_the_tenant_left(host, node)

        b = Tenant("tenant-d", host)
        order_b = provision(b, node, storage_provider)
        status, out = b.ssh('ls -A "$TRAINYARD_ROOT/data/checkpoints"; ls -A ~')
        assert status == 0 and "step-1" not in out and "notes-" not in out, out
        leave_traces(b, b"B" * 30_000, "step-2")
        order_request_termination(order=order_b, by=b.member)
        drive(ProvisioningRun.objects.get(order=order_b, kind=RunKind.TERMINATE))
        bucket_b = Bucket.objects.get(order=order_b).name
        keys = {o["Key"] for o in admin_s3.list_objects_v2(Bucket=bucket_b).get("Contents", [])
                if o["Key"].startswith("checkpoints/")}
        assert keys == {f"checkpoints/{node.hostname}/step-2/model.pt"}
        assert _object(admin_s3, bucket_b, f"checkpoints/{node.hostname}/step-2/model.pt") == b"B" * 30_000
        nothing_of_the_tenant_left(host, node)
    finally:
        host.stop()
