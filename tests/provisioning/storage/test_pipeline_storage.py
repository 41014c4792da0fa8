"""Object storage through the pipeline (in-process runs, simulated nodes, the loopback S3+IAM
server): set-up, a 2-node cluster, rotation as a day-2 run, termination keeping the bucket until
its date and the beat task deleting it, staff rescue (retry, drop), and no secret anywhere."""

import json
import logging
from datetime import timedelta
from decimal import Decimal

import pytest
from botocore.exceptions import ClientError
from django.core.exceptions import PermissionDenied
from django.utils import timezone

from portal.core.states import DomainError
from portal.orders.states import OrderState
from provisioning.fulfilment import day2
from provisioning.fulfilment.orders import order_request_termination
from provisioning.fulfilment.selectors import order_access
from provisioning.models import ProvisioningRun, StepLogLine, StepRun
from provisioning.pipeline import services as pipeline_services
from provisioning.states import RunKind, RunStatus
from provisioning.storage.models import Bucket, Credential
from provisioning.storage.s3ops import make_client
from provisioning.storage.services import StorageResult, credential_reveal
from provisioning.storage.states import BucketState
from provisioning.tasks import storage_delete_expired_task
from tests.conftest import LOOPBACK_NETWORKS
from tests.factories import H100_SKU, approved_order, drain, make_node, submitted_order


def _s3(embedded_s3, key_id, secret):
    return make_client("s3", endpoint_url=embedded_s3.endpoint_url, region="us-east-1",
                       access_key=key_id, secret_key=secret)


def _active(order) -> Credential:
    return Credential.objects.get(bucket__order=order, active=True)


@pytest.fixture
def bucket_order(catalog, people, sim_dir, storage_provider):
    make_node(sku=H100_SKU, state_dir=sim_dir)
    return approved_order(people, storage="minio", storage_tb=2)


def test_the_storage_step_creates_a_bucket_and_a_verified_key(bucket_order, embedded_s3):
    drain(bucket_order.runs.get().pk)
    bucket_order.refresh_from_db()
    assert bucket_order.state == OrderState.ACTIVE
    bucket = Bucket.objects.get(order=bucket_order)
    cred = _active(bucket_order)
    step = StepRun.objects.get(step="storage")
    result = StorageResult.from_dict(step.result)
    assert (result.bucket, result.access_key_id, result.provider) == (bucket.name, cred.access_key_id,
                                                                      "minio")
    assert result.endpoint == embedded_s3.endpoint_url and "secret" not in json.dumps(step.result)
    assert order_access(bucket_order).storage == result
    s3 = _s3(embedded_s3, cred.access_key_id, cred.secret)
    s3.put_object(Bucket=bucket.name, Key="datasets/a.bin", Body=b"abc")
    assert s3.get_object(Bucket=bucket.name, Key="datasets/a.bin")["Body"].read() == b"abc"
    log = list(step.log_lines.values_list("text", flat=True))
    assert any("verified" in line for line in log)


def test_a_two_node_cluster_gets_one_bucket_and_one_key(catalog, people, sim_dir, storage_provider,
                                                        admin_iam):
    for _ in range(2):
        make_node(sku=H100_SKU, state_dir=sim_dir, fabric_group="f1")
    order = approved_order(people, storage="minio", storage_tb=1, node_count=2,
                           network="eth-100g")
    drain(order.runs.get().pk)
    order.refresh_from_db()
    assert order.state == OrderState.ACTIVE
    steps = StepRun.objects.filter(run__order=order, step="storage")
    assert [s.status for s in steps] == ["succeeded", "succeeded"]
    assert len({s.result["access_key_id"] for s in steps}) == 1
    assert Bucket.objects.filter(order=order).count() == 1
    assert Credential.objects.filter(bucket__order=order).count() == 1
    bucket = Bucket.objects.get(order=order).name
    users = [u["UserName"] for u in admin_iam.list_users(PathPrefix="/trainyard/")["Users"]
             if u["UserName"].startswith(bucket + "-")]
    assert len(users) == 1


def test_rotation_is_a_day_two_run(bucket_order, embedded_s3, people):
    drain(bucket_order.runs.get().pk)
    old = _active(bucket_order)
    old_secret = old.secret
    run = day2.server_rotate_storage_key(order=bucket_order, by=people.alice)
    assert run.kind == RunKind.ROTATE_STORAGE_KEY
    assert [o.status for _, o in drain(run.pk)] == ["succeeded"]
    run.refresh_from_db()
    new = _active(bucket_order)
    assert run.status == RunStatus.SUCCEEDED and new.pk != old.pk
    old.refresh_from_db()
    assert old.revoked_at is not None and not old.active
    bucket = Bucket.objects.get(order=bucket_order).name
    with pytest.raises(ClientError):
        _s3(embedded_s3, old.access_key_id, old_secret).list_objects_v2(Bucket=bucket)
    _s3(embedded_s3, new.access_key_id, new.secret).list_objects_v2(Bucket=bucket)
    assert order_access(bucket_order).storage.access_key_id == new.access_key_id
    bucket_order.refresh_from_db()
    assert bucket_order.state == OrderState.ACTIVE


def test_rotation_is_refused_without_storage(catalog, people, sim_dir):
    make_node(sku=H100_SKU, state_dir=sim_dir)
    order = approved_order(people)
    drain(order.runs.get().pk)
    with pytest.raises(DomainError, match="no object storage"):
        day2.server_rotate_storage_key(order=order, by=people.alice)


def test_termination_keeps_the_bucket_until_its_date_then_the_beat_task_deletes_it(
        bucket_order, people, admin_s3, embedded_s3, settings):
    drain(bucket_order.runs.get().pk)
    bucket = Bucket.objects.get(order=bucket_order)
    cred = _active(bucket_order)
    secret = cred.secret
    admin_s3.put_object(Bucket=bucket.name, Key="checkpoints/final.pt", Body=b"w" * 2048)
    order_request_termination(order=bucket_order, by=people.alice)
    run = ProvisioningRun.objects.get(order=bucket_order, kind=RunKind.TERMINATE)
    assert [k[2] for k, _ in drain(run.pk)] == ["revoke_access", "retain_data", "revoke_keys",
                                                "sanitise", "attest", "ready"]
    bucket_order.refresh_from_db()
    bucket.refresh_from_db()
    assert bucket_order.state == OrderState.TERMINATED
    assert bucket.state == BucketState.RETAINED
    expected = timezone.now() + timedelta(days=bucket_order.storage_retention_days)
    assert abs((bucket.retain_until - expected).total_seconds()) < 120
    retain = StepRun.objects.get(run=run, step="retain_data")
    assert retain.result["policy"] == "bucket" and retain.result["retain_until"]
    assert "is simulated" in " ".join(retain.log_lines.values_list("text", flat=True))
    with pytest.raises(ClientError):  # the key went with the servers
        _s3(embedded_s3, cred.access_key_id, secret).list_objects_v2(Bucket=bucket.name)

    assert storage_delete_expired_task() == {"deleted": [], "failed": []}  # not before its date
    assert admin_s3.get_object(Bucket=bucket.name, Key="checkpoints/final.pt")["Body"].read()
    Bucket.objects.filter(pk=bucket.pk).update(retain_until=timezone.now() - timedelta(seconds=1))
    assert storage_delete_expired_task() == {"deleted": [bucket.name], "failed": []}
    with pytest.raises(ClientError):
        admin_s3.head_bucket(Bucket=bucket.name)
    assert Bucket.objects.get(pk=bucket.pk).state == BucketState.DELETED
    assert "provisioning.storage_delete_expired" in {
        e["task"] for e in settings.CELERY_BEAT_SCHEDULE.values()}


def test_termination_without_a_bucket_says_so(catalog, people, sim_dir):
    make_node(sku=H100_SKU, state_dir=sim_dir)
    order = approved_order(people)
    drain(order.runs.get().pk)
    order_request_termination(order=order, by=people.alice)
    run = ProvisioningRun.objects.get(order=order, kind=RunKind.TERMINATE)
    drain(run.pk)
    retain = StepRun.objects.get(run=run, step="retain_data")
    assert retain.result["policy"] == "wipe"
    assert "No bucket was ordered" in retain.log_lines.filter(staff_only=False).get().text


# --- failures and staff rescue -----------------------------------------------------------------
def test_a_provider_without_admin_credentials_fails_loudly(catalog, people, sim_dir, settings):
    settings.STORAGE_PROVIDERS = {**settings.STORAGE_PROVIDERS,
                                  "minio": {"access_key": "", "secret_key": ""}}
    make_node(sku=H100_SKU, state_dir=sim_dir)
    order = approved_order(people, storage="minio", storage_tb=10)
    drain(order.runs.get().pk)
    step = StepRun.objects.get(step="storage")
    assert step.status == "failed"
    assert "has no admin credentials: set STORAGE_MINIO_ACCESS_KEY" in step.error
    order.refresh_from_db()
    assert order.state == OrderState.PROVISION_FAILED
    assert "STORAGE_MINIO_ACCESS_KEY" in order.failure_reason
    assert not Bucket.objects.filter(order=order).exists() or not Credential.objects.exists()


def test_a_provider_kind_without_adapter_fails_loudly(catalog, people, sim_dir, settings):
    settings.STORAGE_PROVIDER_ADAPTERS = {k: v for k, v in settings.STORAGE_PROVIDER_ADAPTERS.items()
                                          if k != "wasabi"}
    make_node(sku=H100_SKU, state_dir=sim_dir)
    order = approved_order(people, storage="wasabi", storage_tb=1)
    drain(order.runs.get().pk)
    step = StepRun.objects.get(step="storage")
    assert step.status == "failed"
    assert "no bucket provider adapter for Wasabi (kind 'wasabi'): add it to STORAGE_PROVIDER_ADAPTERS" \
        in step.error


def test_an_unreachable_provider_is_retried_then_staff_retry_after_the_fix(
        catalog, people, sim_dir, storage_provider, settings):
    settings.PROVISIONING_STEP_MAX_ATTEMPTS = 2
    good = settings.STORAGE_PROVIDERS["minio"]
    settings.STORAGE_PROVIDERS = {**settings.STORAGE_PROVIDERS, "minio": {
        **good, "endpoint_url": "http://127.0.0.1:9", "options": {
            **good["options"], "iam_endpoint_url": "http://127.0.0.1:9"}}}
    make_node(sku=H100_SKU, state_dir=sim_dir)
    order = approved_order(people, storage="minio", storage_tb=1)
    outcomes = drain(order.runs.get().pk)
    assert [o.status for k, o in outcomes if k[2] == "storage"] == ["retry", "failed"]
    step = StepRun.objects.get(step="storage")
    assert "gave up after 2 attempts" in step.error and "will retry" in step.error
    assert not Credential.objects.filter(bucket__order=order).exists()

    settings.STORAGE_PROVIDERS = {**settings.STORAGE_PROVIDERS, "minio": good}  # fixed
    run = order.runs.get()
    pipeline_services.run_retry_step(run=run, by=people.sam)
    drain(run.pk)
    order.refresh_from_db()
    assert order.state == OrderState.ACTIVE
    assert _active(order).access_key_id


def test_staff_drop_storage_from_a_failed_order_and_it_proceeds(catalog, people, sim_dir, settings,
                                                               emails_inline,
                                                               mailoutbox,
                                                               django_capture_on_commit_callbacks):
    settings.STORAGE_PROVIDERS = {**settings.STORAGE_PROVIDERS,
                                  "minio": {"access_key": "", "secret_key": ""}}
    make_node(sku=H100_SKU, state_dir=sim_dir)
    order = approved_order(people, storage="minio", storage_tb=10)
    run = order.runs.get()
    drain(run.pk)
    storage_line = {"label": "Object storage 10 TB (On-site MinIO)", "hourly": "0.21",
                    "monthly": "150.00"}
    type(order).objects.filter(pk=order.pk).update(price_lines=order.price_lines + [storage_line])
    order.refresh_from_db()
    price = order.price_monthly
    assert order.state == OrderState.PROVISION_FAILED
    with pytest.raises(PermissionDenied):
        day2.order_drop_storage(order=order, by=people.alice)  # customers cannot
    mailoutbox.clear()
    with pytest.raises(DomainError, match="only from an order whose set-up failed"):
        day2.order_drop_storage(order=submitted_order(people, storage="minio", storage_tb=1),
                                by=people.sam)
    with django_capture_on_commit_callbacks(execute=True):
        day2.order_drop_storage(order=order, by=people.sam, note="MinIO is being replaced")
    drain(run.pk)
    order.refresh_from_db()
    assert order.state == OrderState.ACTIVE
    assert (order.storage_provider, order.storage_tb) == (None, 0)
    assert order.price_monthly == price - Decimal("150.00")  # 10 TB × $15
    event = order.events.get(transition="drop_storage")
    assert event.actor == people.sam and "MinIO is being replaced" in event.note
    assert StepRun.objects.get(run=run, step="storage").result["bucket"] == ""
    bodies = [m.body for m in mailoutbox if "Object storage could not be set up" in m.body]
    assert len(bodies) == 1 and "MinIO is being replaced" not in bodies[0]


# --- no secret anywhere ------------------------------------------------------------------------
def test_no_secret_in_logs_results_reasons_or_mails(bucket_order, people, emails_inline, login,
                                                    mailoutbox, caplog,
                                                    django_capture_on_commit_callbacks):
    caplog.set_level(logging.DEBUG)
    drain(bucket_order.runs.get().pk)
    secret = _active(bucket_order).secret
    run = day2.server_rotate_storage_key(order=bucket_order, by=people.alice)
    drain(run.pk)
    rotated = _active(bucket_order).secret
    client = login(people.alice)
    revealed = client.post(f"/orders/{bucket_order.reference}/server/storage/reveal/")
    assert rotated in revealed.content.decode()
    after = client.get(f"/orders/{bucket_order.reference}/server/").content.decode()
    with django_capture_on_commit_callbacks(execute=True):
        order_request_termination(order=bucket_order, by=people.alice)
        drain(ProvisioningRun.objects.get(order=bucket_order, kind=RunKind.TERMINATE).pk)
    bucket_order.refresh_from_db()
    places = {
        "step log": "\n".join(StepLogLine.objects.values_list("text", flat=True)),
        "step results": json.dumps(list(StepRun.objects.values_list("result", flat=True))),
        "step errors": "\n".join(StepRun.objects.values_list("error", flat=True)),
        "failure reason": bucket_order.failure_reason,
        "mails": "\n".join(m.subject + m.body for m in mailoutbox),
        "server page after reveal": after,
        "python logs": caplog.text,
    }
    for name, text in places.items():
        for value in (secret, rotated):
            assert value not in text, f"a secret leaked into the {name}"
    assert mailoutbox and any("kept until" in m.body for m in mailoutbox)
    assert credential_reveal(order=bucket_order) is None


def test_the_customers_own_bucket_is_verified_not_created(catalog, people, sim_dir, embedded_s3,
                                                          admin_s3, storage_provider, settings):
    # The customer's endpoint is the loopback S3 server: on-premises, so the operator allows it.
    settings.OUTBOUND_ALLOWED_NETWORKS = LOOPBACK_NETWORKS
    admin_s3.create_bucket(Bucket="acme-own-ckpt")
    make_node(sku=H100_SKU, state_dir=sim_dir)
    order = approved_order(people, storage="custom-s3", storage_tb=0)
    type(order).objects.filter(pk=order.pk).update(
        storage_endpoint_url=embedded_s3.endpoint_url, storage_bucket="acme-own-ckpt",
        storage_access_key_id=embedded_s3.access_key, storage_secret_key=embedded_s3.secret_key)
    drain(order.runs.get().pk)
    order.refresh_from_db()
    assert order.state == OrderState.ACTIVE, order.failure_reason
    bucket = Bucket.objects.get(order=order)
    assert (bucket.name, bucket.managed) == ("acme-own-ckpt", False)
    result = StorageResult.from_dict(StepRun.objects.get(step="storage").result)
    assert result.bucket == "acme-own-ckpt" and embedded_s3.secret_key not in json.dumps(result.to_dict())
    with pytest.raises(DomainError, match="your own bucket"):
        day2.server_rotate_storage_key(order=order, by=people.alice)


def test_the_customers_bucket_with_a_wrong_key_fails_with_a_reason(catalog, people, sim_dir,
                                                                    embedded_s3, storage_provider,
                                                                    settings):
    settings.OUTBOUND_ALLOWED_NETWORKS = LOOPBACK_NETWORKS  # as above
    make_node(sku=H100_SKU, state_dir=sim_dir)
    order = approved_order(people, storage="custom-s3", storage_tb=0)
    type(order).objects.filter(pk=order.pk).update(
        storage_endpoint_url=embedded_s3.endpoint_url, storage_bucket="acme-nope",
        storage_access_key_id="AKIAWRONGWRONG00", storage_secret_key="wrong-secret")
    drain(order.runs.get().pk)
    step = StepRun.objects.get(step="storage")
    assert step.status == "failed" and "acme-nope" in step.error
    assert "wrong-secret" not in step.error
