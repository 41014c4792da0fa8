"""Termination over the ssh driver (real sshd on loopback) copies the node's checkpoint directory
into the order's bucket (loopback S3) with the sync tool before the disks are wiped; the storage
step wrote the node's credentials file, rotation rewrites it."""

import sys

import pytest

from portal.catalog.models import NetworkOption, NvmeOption, StorageProvider
from portal.orders.models import Order
from portal.orders.services import order_place
from portal.orders.states import OrderState
from portal.quotes.configuration import Configuration
from portal.quotes.services import quote_create
from provisioning.approvals import order_approve
from provisioning.fulfilment import order_request_termination, order_submit
from provisioning.models import ProvisioningRun, StepRun
from provisioning.services import server_rotate_storage_key
from provisioning.states import RunKind
from provisioning.storage.models import Bucket, Credential
from provisioning.storage.states import BucketState
from tests.factories import OrganisationFactory, member_of, staff
from tests.provisioning.test_pipeline_ssh import (  # noqa: F401 - fixtures
    _os_image,
    drive,
    gpu_host,
    gpus,
    ssh_node,
)


def _order(node, provider) -> Order:
    org = OrganisationFactory(slug="acme", name="Acme AI")
    customer = member_of(org)
    config = Configuration(sku=node.sku, nvme=NvmeOption.objects.order_by("size_tb").first(),
                           network=NetworkOption.objects.get(slug="eth-1g"),
                           storage_provider=provider, storage_tb=1, storage_retention_days=7)
    order = order_place(quote=quote_create(organisation=org, by=customer, configuration=config),
                        by=customer)
    order_submit(order=order, by=customer)
    order.refresh_from_db()
    if order.state == OrderState.PENDING_APPROVAL:
        order_approve(order=order, by=staff("approver"), node_ids=[node.pk])
    order.refresh_from_db()
    return order


@pytest.mark.django_db
def test_termination_copies_checkpoints_to_the_bucket_before_the_wipe(
        ssh_node, gpus, gpu_host, settings, storage_provider, admin_s3):  # noqa: F811
    settings.PROVISIONING_OS_IMAGE = _os_image()
    settings.STORAGE_NODE_PYTHON = sys.executable  # the node's python3 with boto3
    gpus(ssh_node.sku.gpu_count)
    order = _order(ssh_node, StorageProvider.objects.get(slug="minio"))
    assert order.storage_retention_days == 7
    drive(ProvisioningRun.objects.get(order=order, kind=RunKind.PROVISION))
    order.refresh_from_db()
    assert order.state == OrderState.ACTIVE
    root = gpu_host.trainyard_root
    cred = Credential.objects.get(bucket__order=order, active=True)
    written = (root / "etc/trainyard/s3-credentials").read_text()
    assert f"aws_access_key_id = {cred.access_key_id}" in written and cred.secret in written
    assert oct((root / "etc/trainyard/s3-credentials").stat().st_mode & 0o777) == "0o600"

    # Day 2: the key is rotated and the node's file follows.
    rotation = server_rotate_storage_key(order=order, by=order.placed_by)
    assert drive(rotation) == ["rotate_storage_key:succeeded"]
    new = Credential.objects.get(bucket__order=order, active=True)
    assert new.pk != cred.pk
    assert f"aws_access_key_id = {new.access_key_id}" in (root / "etc/trainyard/s3-credentials").read_text()

    checkpoints = root / "data/checkpoints/step-200"
    checkpoints.mkdir(parents=True)
    (checkpoints / "model.pt").write_bytes(b"\x00weights" * 5000)
    (checkpoints / "optim.pt").write_bytes(b"\x01optim" * 3000)
    order_request_termination(order=order, by=order.placed_by)
    run = ProvisioningRun.objects.get(order=order, kind=RunKind.TERMINATE)
    assert drive(run) == ["retain_data:succeeded", "revoke_credentials:succeeded", "wipe:succeeded",
                          "ready:succeeded"]
    bucket = Bucket.objects.get(order=order)
    prefix = f"checkpoints/{ssh_node.hostname}/step-200"
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
