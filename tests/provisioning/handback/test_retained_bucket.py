"""During retention a terminated order's bucket stays reachable: the order page and the API say
where it is, what was copied and until when, and the customer gets a read-only key (list and get
only, its secret shown once, a new one replacing it, revoked with the bucket). Real S3+IAM server
on loopback; the simulated node copies nothing, so the test puts the checkpoint in itself."""

from datetime import timedelta

import pytest
from botocore.exceptions import ClientError
from django.core.exceptions import PermissionDenied
from django.utils import timezone

from portal.core.states import DomainError
from provisioning.fulfilment.day2 import order_retention_key_request
from provisioning.fulfilment.orders import order_request_termination
from provisioning.storage.models import Bucket, Credential
from provisioning.storage.s3ops import make_client
from provisioning.storage.services import retention_key_issue
from provisioning.storage.states import BucketState
from provisioning.tasks import storage_delete_expired_task
from tests.api.conftest import assert_problem, key_client
from tests.factories import H100_SKU, approved_order, drain, make_node

pytestmark = pytest.mark.django_db
CHECKPOINT = b"\x00weights" * 1000


@pytest.fixture
def terminated(catalog, people, sim_dir, storage_provider, admin_s3):
    make_node(sku=H100_SKU, state_dir=sim_dir, hostname="gpu-h100-r1")
    order = approved_order(people, storage="minio", storage_tb=2)
    drain(order.runs.get().pk)
    bucket = Bucket.objects.get(order=order)
    admin_s3.put_object(Bucket=bucket.name, Key="checkpoints/gpu-h100-r1/step-9/model.pt",
                        Body=CHECKPOINT)
    order_request_termination(order=order, by=people.alice)
    drain(order.runs.get(kind="terminate").pk)
    order.refresh_from_db()
    assert order.state == "terminated"
    return order


def _s3(embedded_s3, key_id, secret):
    return make_client("s3", endpoint_url=embedded_s3.endpoint_url, region="us-east-1",
                       access_key=key_id, secret_key=secret)


def _code(call) -> str:
    with pytest.raises(ClientError) as refused:
        call()
    return refused.value.response["Error"]["Code"]


def _issue(order, by, capture) -> Credential:
    with capture() as queued:
        order_retention_key_request(order=order, by=by)
    assert len(queued) == 1  # the worker's task, after the commit
    retention_key_issue(order_id=order.pk)  # what that task runs
    return Credential.objects.get(bucket__order=order, active=True, read_only=True)


def test_the_read_only_key_lists_and_gets_and_cannot_write_delete_or_reach_another_bucket(
        terminated, people, embedded_s3, settings, django_capture_on_commit_callbacks):
    bucket = Bucket.objects.get(order=terminated)
    key = _issue(terminated, people.alice, django_capture_on_commit_callbacks)
    s3 = _s3(embedded_s3, key.access_key_id, key.secret)
    listed = s3.list_objects_v2(Bucket=bucket.name, Prefix="checkpoints/")["Contents"]
    assert [o["Key"] for o in listed] == ["checkpoints/gpu-h100-r1/step-9/model.pt"]
    got = s3.get_object(Bucket=bucket.name, Key="checkpoints/gpu-h100-r1/step-9/model.pt")
    assert got["Body"].read() == CHECKPOINT
    assert _code(lambda: s3.put_object(Bucket=bucket.name, Key="x", Body=b"x")) == "AccessDenied"
    assert _code(lambda: s3.delete_object(Bucket=bucket.name,
                                          Key="checkpoints/gpu-h100-r1/step-9/model.pt")) == "AccessDenied"
    canary = f"{settings.STORAGE_BUCKET_PREFIX}-canary"  # the provider's (s3server.storage_provider)
    assert _code(lambda: s3.list_objects_v2(Bucket=canary)) == "AccessDenied"


def test_a_new_read_only_key_replaces_the_old_one_and_both_go_with_the_bucket(
        terminated, people, embedded_s3, django_capture_on_commit_callbacks):
    bucket = Bucket.objects.get(order=terminated)
    first = _issue(terminated, people.alice, django_capture_on_commit_callbacks)
    first_secret = first.secret
    second = _issue(terminated, people.alice, django_capture_on_commit_callbacks)
    assert second.pk != first.pk
    first.refresh_from_db()
    assert not first.active and first.revoked_at is not None and first.secret == ""
    assert _code(lambda: _s3(embedded_s3, first.access_key_id, first_secret).list_objects_v2(
        Bucket=bucket.name)) == "InvalidAccessKeyId"
    second_secret = second.secret
    Bucket.objects.filter(pk=bucket.pk).update(retain_until=timezone.now() - timedelta(seconds=1))
    assert storage_delete_expired_task() == {"deleted": [bucket.name], "failed": []}
    second.refresh_from_db()
    assert second.revoked_at is not None
    assert _code(lambda: _s3(embedded_s3, second.access_key_id, second_secret).list_objects_v2(
        Bucket=bucket.name)) == "InvalidAccessKeyId"


def test_no_read_only_key_before_termination_or_for_an_outsider(
        terminated, catalog, people, sim_dir):
    with pytest.raises(PermissionDenied):
        order_retention_key_request(order=terminated, by=people.charlie)
    make_node(sku=H100_SKU, state_dir=sim_dir)
    running = approved_order(people, storage="minio", storage_tb=2)
    drain(running.runs.get().pk)
    with pytest.raises(DomainError, match="kept after termination"):
        order_retention_key_request(order=running, by=people.alice)
    Bucket.objects.filter(order=terminated).update(state=BucketState.DELETED)
    with pytest.raises(DomainError, match="kept after termination"):
        order_retention_key_request(order=terminated, by=people.alice)


# --- the order page ---------------------------------------------------------------------------
def test_the_order_page_shows_the_kept_bucket_and_gives_a_read_only_key_once(
        terminated, people, login, django_capture_on_commit_callbacks):
    bucket = Bucket.objects.get(order=terminated)
    client = login(people.alice)
    page = client.get(f"/orders/{terminated.reference}/").content.decode()
    assert "Your data" in page and bucket.name in page and bucket.endpoint in page
    assert f"Kept until {bucket.retain_until:%-d %b %Y}" in page
    assert "gpu-h100-r1" in page and "simulated node: nothing to copy" in page  # no disk
    assert "Issue a read-only key" in page and "Show the secret" not in page

    with django_capture_on_commit_callbacks() as queued:
        asked = client.post(f"/orders/{terminated.reference}/data/read-key/", follow=True)
    assert "A read-only key is being issued" in asked.content.decode() and len(queued) == 1
    assert "reload this page in a minute" in asked.content.decode()
    retention_key_issue(order_id=terminated.pk)
    key = Credential.objects.get(bucket=bucket, read_only=True, active=True)
    page = client.get(f"/orders/{terminated.reference}/").content.decode()
    assert key.access_key_id in page and "Show the secret (once)" in page and key.secret not in page

    shown = client.post(f"/orders/{terminated.reference}/data/read-key/reveal/")
    assert shown.status_code == 200 and key.secret in shown.content.decode()
    assert "lists and reads the bucket only" in shown.content.decode()
    assert shown["Referrer-Policy"] == "no-referrer"
    again = client.post(f"/orders/{terminated.reference}/data/read-key/reveal/", follow=True)
    assert key.secret not in again.content.decode()
    assert "already shown once" in again.content.decode()


def test_outsiders_get_404_on_the_kept_bucket_and_its_key(terminated, people, login):
    client = login(people.charlie)
    for method, path in [("get", ""), ("post", "data/read-key/"), ("post", "data/read-key/reveal/")]:
        response = getattr(client, method)(f"/orders/{terminated.reference}/{path}")
        assert response.status_code == 404
    assert not Credential.objects.filter(bucket__order=terminated, read_only=True).exists()


# --- the API ----------------------------------------------------------------------------------
def test_the_api_shows_the_kept_bucket_and_issues_and_reveals_the_read_only_key(
        terminated, people, django_capture_on_commit_callbacks):
    api = key_client(people.acme)
    order = api.get(f"/api/v1/orders/{terminated.reference}").json()
    data = order["retained_data"]
    bucket = Bucket.objects.get(order=terminated)
    assert (data["bucket"], data["endpoint"], data["state"]) == (bucket.name, bucket.endpoint, "retained")
    assert data["retain_until"].startswith(f"{bucket.retain_until:%Y-%m-%d}")
    assert data["copied"] == [{"hostname": "gpu-h100-r1", "files": 0, "bytes_copied": 0,
                               "verified": True, "note": "simulated node: nothing to copy"}]
    assert (data["read_key_id"], data["read_key_pending"]) == ("", False)
    reveal = f"/api/v1/orders/{terminated.reference}/storage/read-only-key/reveal"
    assert_problem(api.post(reveal), 409)

    with django_capture_on_commit_callbacks() as queued:
        asked = api.post(f"/api/v1/orders/{terminated.reference}/storage/read-only-key")
    assert asked.status_code == 202 and len(queued) == 1
    assert api.get(f"/api/v1/orders/{terminated.reference}").json()["retained_data"]["read_key_pending"]
    retention_key_issue(order_id=terminated.pk)
    key = Credential.objects.get(bucket=bucket, read_only=True, active=True)
    shown = api.post(reveal, HTTP_IDEMPOTENCY_KEY="ro-1")
    assert shown.status_code == 200 and shown.json()["secret_access_key"] == key.secret
    assert shown["Cache-Control"] == "no-store"
    assert "already shown once" in assert_problem(api.post(reveal), 409)["detail"]
    assert api.get(f"/api/v1/orders/{terminated.reference}").json()["retained_data"][
        "read_key_id"] == key.access_key_id


def test_an_active_order_has_no_retained_data(catalog, people, sim_dir, storage_provider):
    make_node(sku=H100_SKU, state_dir=sim_dir)
    order = approved_order(people, storage="minio", storage_tb=2)
    drain(order.runs.get().pk)
    assert key_client(people.acme).get(f"/api/v1/orders/{order.reference}").json()[
        "retained_data"] is None


def test_api_outsiders_get_404_and_a_read_key_cannot_issue(terminated, people):
    outsider = key_client(people.outsider_org)
    base = f"/api/v1/orders/{terminated.reference}"
    assert_problem(outsider.get(base), 404)
    assert_problem(outsider.post(f"{base}/storage/read-only-key"), 404)
    assert_problem(outsider.post(f"{base}/storage/read-only-key/reveal"), 404)
    reader = key_client(people.acme, scopes=["read"])
    assert_problem(reader.post(f"{base}/storage/read-only-key"), 403)
    assert not Bucket.objects.get(order=terminated).read_key_requested_at


def test_a_read_only_key_request_delivered_twice_issues_one_key(
        terminated, people, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks():
        order_retention_key_request(order=terminated, by=people.alice)
    first = retention_key_issue(order_id=terminated.pk)
    assert first is not None
    assert retention_key_issue(order_id=terminated.pk) is None  # served already: nothing more
    assert Credential.objects.filter(bucket__order=terminated, read_only=True).count() == 1


def test_a_read_only_key_issued_while_the_bucket_is_deleted_is_revoked_not_kept(
        terminated, people, embedded_s3, monkeypatch, django_capture_on_commit_callbacks):
    from provisioning.storage import services

    with django_capture_on_commit_callbacks():
        order_retention_key_request(order=terminated, by=people.alice)
    bucket = Bucket.objects.get(order=terminated)
    real_verify = services.verify_read_only
    issued = {}

    def verify_then_the_bucket_goes(client, name, **kwargs):
        report = real_verify(client, name, **kwargs)
        issued["key"] = client._request_signer._credentials.access_key
        issued["secret"] = client._request_signer._credentials.secret_key
        Bucket.objects.filter(pk=bucket.pk).update(state=BucketState.DELETED)  # the beat won
        return report

    monkeypatch.setattr(services, "verify_read_only", verify_then_the_bucket_goes)
    assert retention_key_issue(order_id=terminated.pk) is None
    assert not Credential.objects.filter(bucket=bucket, read_only=True).exists()
    assert _code(lambda: _s3(embedded_s3, issued["key"], issued["secret"]).list_objects_v2(
        Bucket=bucket.name)) == "InvalidAccessKeyId"


def test_a_read_only_key_not_issued_in_time_can_be_asked_for_again(terminated, people, login):
    Bucket.objects.filter(order=terminated).update(
        read_key_requested_at=timezone.now() - timedelta(hours=1))
    page = login(people.alice).get(f"/orders/{terminated.reference}/").content.decode()
    assert "could not be issued" in page and "Issue a read-only key" in page
