"""A 2-node cluster over two real sshd test hosts (each its own TRAINYARD_ROOT), both declared
CPU test hosts: the first node's acceptance waits for both stacks and for the second node's own
checks, then one training job runs across them (one torchrun per host, gloo over loopback, world
size 4); the checkpoint shards of both hosts meet in the order's bucket and each host reads all
of them back."""

import pytest

from portal.catalog.models import NetworkOption, NvmeOption, ServerSKU
from portal.orders.services import order_place
from portal.orders.states import OrderState
from portal.quotes.configuration import Configuration
from portal.quotes.services import quote_create
from provisioning import runs
from provisioning.approvals import order_approve
from provisioning.fulfilment import order_submit
from provisioning.models import ProvisioningRun, StepRun
from provisioning.pipeline import engine
from provisioning.selectors import acceptance_report
from provisioning.services import node_enrol
from provisioning.stack.packages import TEST_HOST_PACKAGES
from provisioning.states import RunKind
from provisioning.storage.models import Bucket
from provisioning.transitions import node_transition
from tests.conftest import missing_service
from tests.factories import OrganisationFactory, member_of, staff
from tests.provisioning.sshd import SshdUnavailable, start_sshd
from tests.provisioning.stack.venv_cache import link_cached_venv
from tests.provisioning.test_pipeline_ssh import SKU, _os_image

pytestmark = pytest.mark.torch


@pytest.fixture(scope="module")
def two_hosts(tmp_path_factory):
    hosts = []
    try:
        for name in ("a", "b"):
            base = tmp_path_factory.mktemp(f"cluster-{name}")
            (base / "root").mkdir()
            link_cached_venv(base / "root", TEST_HOST_PACKAGES)  # the test host's stack
            host = start_sshd(base / "sshd", env={"TRAINYARD_ROOT": str(base / "root")})
            key = base / "id_ed25519"
            key.write_text(host.client_key_pem)
            key.chmod(0o600)
            host.key_file = key
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


@pytest.mark.django_db
def test_a_two_node_cluster_trains_across_both_hosts(two_hosts, catalog, settings, storage_provider,
                                                     admin_s3):
    settings.PROVISIONING_OS_IMAGE = _os_image()
    settings.PROVISIONING_STEP_LEASE_S = 1800  # see the ssh_node fixture: no renewal in-test
    sku = ServerSKU.objects.get(slug=SKU)
    operator = staff("operator")
    nodes = [node_transition(
        node=node_enrol(by=operator, sku=sku, hostname=f"cpu-ssh-{i}", fabric_group="loop",
                        management_address=f"{h.host}:{h.port}", fabric_address=h.host, driver="ssh",
                        driver_options={"host_key": h.host_public_key, "private_key_file": str(h.key_file),
                                        "apt_packages": ["bash"], "connect_timeout_s": 5,
                                        "test_host": True}),
        name="accept", by=operator, note="test fixture: a CPU sshd host")
             for i, h in enumerate(two_hosts)]
    org = OrganisationFactory(slug="acme", name="Acme AI")
    customer = member_of(org)
    config = Configuration(sku=sku, nvme=NvmeOption.objects.order_by("size_tb").first(),
                           network=NetworkOption.objects.get(slug="eth-100g"), node_count=2,
                           storage_provider=storage_provider, storage_tb=1)
    order = order_place(quote=quote_create(organisation=org, by=customer, configuration=config),
                        by=customer)
    order_submit(order=order, by=customer)
    order.refresh_from_db()
    order_approve(order=order, by=staff("approver"), node_ids=[n.pk for n in nodes])
    run = ProvisioningRun.objects.get(order=order, kind=RunKind.PROVISION)

    outcomes = drive_until_done(run)

    order.refresh_from_db()
    assert order.state == OrderState.ACTIVE, (outcomes, order.failure_reason)
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
    assert "acceptance:waiting" in outcomes  # the first node waited for the second's checks
    assert {c.node for c in report.checks if c.name == "NCCL all-reduce bus bandwidth"} == {
        "cpu-ssh-0", "cpu-ssh-1"}
