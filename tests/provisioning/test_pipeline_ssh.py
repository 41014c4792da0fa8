"""The provisioning pipeline with the ssh driver against a real sshd test host on loopback.

An order is quoted, placed, submitted and approved through the order services; the pipeline's
rendered scripts then run for real over SSH on this machine (a plain Debian host, no GPUs).
What is a stand-in, and why:

- The OS image the pipeline asks for is this host's own release (``debian-12``): the ssh
  driver verifies a pre-installed host, it does not install one.
- ``TRAINYARD_ROOT`` (set for every session through sshd's ``SetEnv``) points the stack
  bootstrap at a temp dir, so the test writes ``<tmp>/etc/trainyard/env.sh`` and not this
  machine's ``/etc``. The rendered scripts honour ``TRAINYARD_ROOT`` for exactly this.
- The node is enrolled as a declared CPU test host (driver option ``test_host``): acceptance
  trains for real with 2 gloo processes and its GPU checks skip with that reason. The same
  host enrolled as a GPU node fails acceptance the way a host without a GPU driver must.
- The stack step runs the real bootstrap; its venv (torch CPU build and numpy, the test host's
  packages) is built once per machine and linked in beforehand
  (``tests/provisioning/stack/venv_cache.py``), so a slow first pip install stays out of a
  step's lease.
- A fake ``nvidia-smi`` on the session's PATH (recorded output format) stands in for the GPUs
  of the day-2 health check.
"""

import os
import shutil
from dataclasses import replace
from pathlib import Path

import pytest

from portal.catalog.models import NetworkOption, NvmeOption, ServerSKU
from portal.orders.models import Order
from portal.orders.services import order_place
from portal.orders.states import OrderState
from portal.quotes.configuration import Configuration
from portal.quotes.services import quote_create
from provisioning.fulfilment.approvals import order_approve
from provisioning.fulfilment.day2 import server_rotate_storage_key
from provisioning.fulfilment.orders import order_request_termination, order_submit
from provisioning.fulfilment.selectors import acceptance_report
from provisioning.inventory.services import node_enrol
from provisioning.models import ProvisioningRun, StepLogLine, StepRun
from provisioning.monitoring import health
from provisioning.pipeline import engine, runs
from provisioning.stack.bundle import RenderedStack, render_stack
from provisioning.stack.packages import TEST_HOST_PACKAGES
from provisioning.states import STEPS, NodeState, RunKind, RunStatus, StepStatus
from provisioning.storage.models import Bucket, Credential
from provisioning.storage.states import BucketState
from provisioning.transitions import node_transition
from tests.conftest import missing_service
from tests.factories import OrganisationFactory, member_of, staff
from tests.provisioning.sshd import SshdUnavailable, start_sshd
from tests.provisioning.stack.venv_cache import link_cached_tools, link_cached_venv

SKU = "2x-l4-24gb"
WITHOUT_STACK = "tests.provisioning.test_pipeline_ssh.render_without_stack"
FAKE_NVIDIA_SMI = """#!/bin/sh
# Stand-in for nvidia-smi on a host without GPUs: {count} GPU(s), as an L4 host answers.
case "$*" in
  *--query-gpu=name,*|*--query-gpu=index*)
    i=0; while [ $i -lt {count} ]; do echo "$i, NVIDIA L4, 4$i, 0, 23034"; i=$((i+1)); done ;;
  *--query-gpu=name*)
    i=0; while [ $i -lt {count} ]; do echo "NVIDIA L4"; i=$((i+1)); done ;;
  *--query-gpu=driver_version*) echo "550.54.15" ;;
  *) echo "NVIDIA-SMI 550.54.15  Driver Version: 550.54.15  CUDA Version: 12.4" ;;
esac
"""


def _os_image() -> str:
    pairs = (line.split("=", 1) for line in Path("/etc/os-release").read_text().splitlines()
             if "=" in line)
    release = {k: v.strip('"') for k, v in pairs}
    return f"{release.get('ID', 'unknown')}-{release.get('VERSION_ID', '0')}"


@pytest.fixture(scope="module")
def gpu_host(tmp_path_factory):
    """An sshd whose sessions see a PATH with a (removable) fake nvidia-smi and TRAINYARD_ROOT."""
    base = tmp_path_factory.mktemp("gpu-host")
    (base / "bin").mkdir()
    (base / "root").mkdir()
    path = f"{base / 'bin'}:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
    try:
        host = start_sshd(base / "sshd", env={"PATH": path, "TRAINYARD_ROOT": str(base / "root")})
    except SshdUnavailable as exc:
        missing_service(f"this test needs a real sshd test host: {exc}")
    key_file = base / "id_ed25519"
    key_file.write_text(host.client_key_pem)
    key_file.chmod(0o600)
    host.key_file = key_file
    host.bin_dir = base / "bin"
    host.trainyard_root = base / "root"
    link_cached_venv(host.trainyard_root, TEST_HOST_PACKAGES)  # the test host's stack
    link_cached_tools(host.trainyard_root)  # the node tools; the host's own python3 has no boto3
    try:
        yield host
    finally:
        host.stop()


@pytest.fixture
def gpus(gpu_host):
    """Puts the fake nvidia-smi on the test host's PATH for one test."""

    def install(count: int) -> None:
        smi = gpu_host.bin_dir / "nvidia-smi"
        smi.write_text(FAKE_NVIDIA_SMI.format(count=count))
        smi.chmod(0o755)

    yield install
    (gpu_host.bin_dir / "nvidia-smi").unlink(missing_ok=True)
    shutil.rmtree(gpu_host.trainyard_root / "etc", ignore_errors=True)


def _enrol(gpu_host, hostname: str, **options):
    operator = staff("operator")
    sku = ServerSKU.objects.get(slug=SKU)
    # Public facts only in driver_options: the pinned host key and where the key file is.
    # The private key itself is read from that file by the worker (see the driver's docstring).
    # Accepted directly, as make_node does: this is a CPU sshd host with no GPU to health-check.
    node = node_enrol(by=operator, sku=sku, hostname=hostname,
                      management_address=f"{gpu_host.host}:{gpu_host.port}", driver="ssh",
                      driver_options={"host_key": gpu_host.host_public_key,
                                      "private_key_file": str(gpu_host.key_file),
                                      "apt_packages": ["bash", "coreutils"],
                                      "connect_timeout_s": 5, **options})
    return node_transition(node=node, name="accept", by=operator, note="test fixture")


def render_without_stack(**kwargs) -> RenderedStack:
    """The real rendering with a bootstrap that installs nothing: a node left without its stack."""
    real = render_stack(**kwargs)
    skipped = replace(real.files[0], content="#!/bin/bash\necho 'stack left out by this test'\n")
    return RenderedStack(real.inputs, (skipped,))


@pytest.fixture
def ssh_node(catalog, gpu_host, settings):
    """The sshd host enrolled as a declared CPU test host: acceptance trains with 2 gloo
    processes through the real bootstrap (its venv prebuilt by ``link_cached_venv``)."""
    # Acceptance trains for a minute or more. The lease thread renews on its own connection,
    # which cannot see this test's uncommitted rows: no renewal falls due within the test.
    settings.PROVISIONING_STEP_LEASE_S = 1800
    return _enrol(gpu_host, "l4-ssh-01", test_host=True)


@pytest.fixture
def gpu_ssh_node(catalog, gpu_host):
    """The same host enrolled as a GPU node (no test_host): what it lacks fails acceptance."""
    return _enrol(gpu_host, "l4-ssh-02")


def approved_order(node, storage_provider=None, **storage_options) -> Order:
    org = OrganisationFactory(slug="acme", name="Acme AI")
    customer = member_of(org)
    storage = ({"storage_provider": storage_provider, "storage_tb": 1, **storage_options}
               if storage_provider else {})
    config = Configuration(sku=node.sku, nvme=NvmeOption.objects.order_by("size_tb").first(),
                           network=NetworkOption.objects.get(slug="eth-1g"), **storage)
    order = order_place(quote=quote_create(organisation=org, by=customer, configuration=config),
                        by=customer)
    order_submit(order=order, by=customer)
    order.refresh_from_db()
    if order.state == OrderState.PENDING_APPROVAL:
        order_approve(order=order, by=staff("approver"), node_ids=[node.pk])
    order.refresh_from_db()
    assert order.state == OrderState.APPROVED
    return order


def drive(run: ProvisioningRun) -> list[str]:
    """Runs the pipeline in this process the way the tasks do: start, then each queued step."""
    queue = list(runs.run_start(run_id=run.pk))
    outcomes = []
    while queue:
        run_id, node_id, step = queue.pop(0)
        outcome = engine.step_execute(run_id=run_id, node_id=node_id, step=step)
        outcomes.append(f"{step}:{outcome.status}")
        queue += outcome.next_steps
    return outcomes


def log_of(run, step) -> list[str]:
    return list(StepLogLine.objects.filter(step_run__run=run, step_run__step=step)
                .values_list("text", flat=True))


@pytest.mark.torch
@pytest.mark.django_db
def test_an_order_goes_active_and_terminates_with_the_ssh_driver(ssh_node, gpu_host, settings,
                                                                  storage_provider, admin_s3):
    """End to end: the real pipeline over SSH; acceptance trains DDP and FSDP2 with 2 gloo
    processes through the launcher, the checkpoint goes to the order's bucket (loopback S3) and
    comes back, and the order becomes active with the report. On day 2 the bucket key is
    rotated and the node's credentials file follows; termination copies the node's checkpoint
    directory into the bucket with the sync tool before the disks are wiped."""
    settings.PROVISIONING_OS_IMAGE = _os_image()
    order = approved_order(ssh_node, storage_provider, storage_retention_days=7)
    run = ProvisioningRun.objects.get(order=order, kind=RunKind.PROVISION)

    outcomes = drive(run)

    assert outcomes == [f"{spec.name}:succeeded" for spec in STEPS[RunKind.PROVISION]], \
        StepRun.objects.filter(run=run).exclude(error="").values_list("step", "error").first()
    order.refresh_from_db()
    ssh_node.refresh_from_db()
    run.refresh_from_db()
    assert order.state == OrderState.ACTIVE
    assert ssh_node.state == NodeState.ACTIVE
    assert run.status == RunStatus.SUCCEEDED
    # Each step's output came from the host, line by line.
    assert f"os-release: {_pretty_name()}" in log_of(run, "deploy_os")
    assert "prerequisites present: bash coreutils" in log_of(run, "deploy_os")
    assert "no NVMe data devices recorded on this node: /data stays on the system disk" in log_of(
        run, "configure")
    env_sh = gpu_host.trainyard_root / "etc/trainyard/env.sh"
    assert f"wrote {env_sh}" in log_of(run, "stack")
    assert "export NNODES=1" in env_sh.read_text()
    # The acceptance job ran for real on the host and its report is the order's.
    report = acceptance_report(order)
    assert report.passed and report.trained and not report.simulated and report.test_host
    assert (report.world_size, report.device, report.versions["backend"]) == (2, "cpu", "gloo")
    assert report.fsdp_losses[-1] < 0.5 * report.fsdp_losses[0]
    assert report.ddp_losses[-1] < 0.5 * report.ddp_losses[0]
    outcomes = {c.name: c.outcome for c in report.checks}
    assert outcomes["DDP loss falls"] == outcomes["FSDP2 loss falls"] == "pass"
    assert outcomes["sharded checkpoint round trip"] == "pass"
    # Hardware checks found no hardware on the test host: skipped, with the reason.
    skipped = [c for c in report.checks if c.outcome == "skip"]
    assert {c.name for c in skipped} >= {"GPU health (nvidia-smi)", "NCCL all-reduce bus bandwidth",
                                         "DCGM diagnostics (dcgmi diag -r 1)"}
    assert all("test host" in c.detail for c in skipped)
    assert report.checkpoint.bucket and report.checkpoint.mismatched == 0
    bucket = Bucket.objects.get(order=order).name
    prefix = f"acceptance/run-{run.pk}/attempt-1/"
    keys = {o["Key"] for o in admin_s3.list_objects_v2(Bucket=bucket, Prefix=prefix)["Contents"]}
    assert {prefix + ".metadata", prefix + "__0_0.distcp", prefix + "__1_0.distcp"} <= keys
    _rotate_then_terminate(order, ssh_node, gpu_host, admin_s3)


def _rotate_then_terminate(order, node, host, admin_s3) -> None:
    root = host.trainyard_root
    credentials = root / "etc/trainyard/s3-credentials"
    cred = Credential.objects.get(bucket__order=order, active=True)
    written = credentials.read_text()
    assert f"aws_access_key_id = {cred.access_key_id}" in written and cred.secret in written
    assert oct(credentials.stat().st_mode & 0o777) == "0o600"

    # Day 2: the key is rotated and the node's file follows.
    rotation = server_rotate_storage_key(order=order, by=order.placed_by)
    assert drive(rotation) == ["rotate_storage_key:succeeded"]
    new = Credential.objects.get(bucket__order=order, active=True)
    assert new.pk != cred.pk
    assert f"aws_access_key_id = {new.access_key_id}" in credentials.read_text()

    checkpoints = root / "data/checkpoints/step-200"
    checkpoints.mkdir(parents=True)
    (checkpoints / "model.pt").write_bytes(b"\x00weights" * 5000)
    (checkpoints / "optim.pt").write_bytes(b"\x01optim" * 3000)
    order_request_termination(order=order, by=order.placed_by)
    run = ProvisioningRun.objects.get(order=order, kind=RunKind.TERMINATE)
    assert drive(run) == [f"{spec.name}:succeeded" for spec in STEPS[RunKind.TERMINATE]]
    bucket = Bucket.objects.get(order=order)
    prefix = f"checkpoints/{node.hostname}/step-200"
    got = admin_s3.get_object(Bucket=bucket.name, Key=f"{prefix}/model.pt")["Body"].read()
    assert got == b"\x00weights" * 5000
    assert admin_s3.head_object(Bucket=bucket.name, Key=f"{prefix}/optim.pt")["ContentLength"] == 18000
    retain = StepRun.objects.get(run=run, step="retain_data")
    assert (retain.result["files"], retain.result["bytes_copied"]) == (2, 58000)
    assert bucket.state == BucketState.RETAINED
    log = "\n".join(retain.log_lines.values_list("text", flat=True))
    assert '"ok": true' in log and new.secret not in log
    order.refresh_from_db()
    assert order.state == OrderState.TERMINATED
    assert order.storage_retention_days == 7
    # Nothing of the tenant stays on the node: credentials, configs, checkpoints.
    assert not credentials.exists() and not (root / "etc/trainyard/env.sh").exists()
    assert list((root / "data").iterdir()) == []
    assert StepRun.objects.get(run=run, step="attest").result["clean"] is True


@pytest.mark.django_db
def test_a_node_without_the_stack_fails_acceptance_and_says_why(ssh_node, gpu_host, settings):
    settings.PROVISIONING_OS_IMAGE = _os_image()
    settings.PROVISIONING_STACK_RENDERER = WITHOUT_STACK
    (gpu_host.trainyard_root / "etc/trainyard/launch.sh").unlink(missing_ok=True)
    order = approved_order(ssh_node)
    run = ProvisioningRun.objects.get(order=order, kind=RunKind.PROVISION)

    assert drive(run)[-1] == "acceptance:failed"
    step = StepRun.objects.get(run=run, step="acceptance")
    assert "training job (l4-ssh-01: the training stack is not installed on l4-ssh-01" in step.error
    assert "launch.sh" in step.error and "run the stack step first" in step.error
    order.refresh_from_db()
    assert order.state == OrderState.PROVISION_FAILED


@pytest.mark.django_db
def test_day_two_health_check_over_ssh(ssh_node, gpus):
    gpus(ssh_node.sku.gpu_count)
    check = health.node_health_check(node=ssh_node)
    assert check.ok, check.problems
    assert check.gpu_count == 2
    assert "NVIDIA L4" in check.raw


@pytest.mark.django_db
def test_a_host_without_gpus_fails_the_stack_preflight_and_says_why(gpu_ssh_node, gpu_host, settings):
    """The stack's hardware preflight runs again for every deploy (before, a marker left by an
    earlier deploy on this host skipped it and acceptance was the first to notice): a GPU node
    without a driver fails there, with the reason, and nothing else is installed."""
    ssh_node = gpu_ssh_node  # not a declared test host: no GPUs is a failure
    settings.PROVISIONING_OS_IMAGE = _os_image()
    order = approved_order(ssh_node)  # no fake nvidia-smi: a plain host
    run = ProvisioningRun.objects.get(order=order, kind=RunKind.PROVISION)

    outcomes = drive(run)

    assert outcomes[-1] == "stack:failed"
    order.refresh_from_db()
    ssh_node.refresh_from_db()
    assert order.state == OrderState.PROVISION_FAILED
    step = StepRun.objects.get(run=run, step="stack")
    assert step.status == StepStatus.FAILED
    assert "FAIL nvidia-smi not found: no NVIDIA driver" in step.error
    assert not StepRun.objects.filter(run=run, step="acceptance", status=StepStatus.SUCCEEDED).exists()


@pytest.mark.django_db
def test_a_host_with_another_os_fails_deploy_permanently(ssh_node, settings):
    settings.PROVISIONING_OS_IMAGE = "ubuntu-24.04-cuda-12.8"
    if _os_image() == "ubuntu-24.04":
        pytest.skip("the test host runs the default image")
    order = approved_order(ssh_node)
    run = ProvisioningRun.objects.get(order=order, kind=RunKind.PROVISION)

    outcomes = drive(run)

    assert outcomes[-1] == "deploy_os:failed"
    step = StepRun.objects.get(run=run, step="deploy_os")
    assert step.attempts == 1  # permanent: not retried
    assert "does not run ubuntu-24.04-cuda-12.8" in step.error
    ssh_node.refresh_from_db()
    assert ssh_node.state == NodeState.FAILED_DEPLOY


@pytest.mark.torch
@pytest.mark.celery_worker
@pytest.mark.django_db(transaction=True)  # the catalog fixture asks for `db`: commit for real
def test_an_order_goes_active_through_a_real_worker(request, monkeypatch, ssh_node, gpus, gpu_host):
    # The worker is another process: it reads the image and the renderer from its environment.
    monkeypatch.setenv("PROVISIONING_OS_IMAGE", _os_image())
    worker = request.getfixturevalue("celery_worker_process")
    gpus(ssh_node.sku.gpu_count)
    from django.db import transaction

    with transaction.atomic():
        order = approved_order(ssh_node)  # provisioning is queued when this commits

    _wait_for(lambda: Order.objects.get(pk=order.pk).state in (
        OrderState.ACTIVE, OrderState.PROVISION_FAILED), worker, timeout=600)
    order.refresh_from_db()
    assert order.state == OrderState.ACTIVE, (order.failure_reason, worker.output()[-3000:])
    assert acceptance_report(order).passed and acceptance_report(order).trained
    assert os.path.exists(gpu_host.trainyard_root / "etc/trainyard/env.sh")


def _wait_for(condition, worker, timeout: float = 120.0) -> None:
    import time

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return
        if worker.proc.poll() is not None:
            pytest.fail(f"worker exited:\n{worker.output()[-3000:]}")
        time.sleep(0.2)
    pytest.fail(f"the pipeline did not finish within {timeout:.0f}s:\n{worker.output()[-3000:]}")


def _pretty_name() -> str:
    for line in Path("/etc/os-release").read_text().splitlines():
        if line.startswith("PRETTY_NAME="):
            return line.split("=", 1)[1].strip('"')
    return ""

