"""Rotation, revocation, retention and deletion against the loopback S3+IAM server."""

from datetime import timedelta

import pytest
from botocore.exceptions import ClientError
from django.utils import timezone

from provisioning.drivers.base import DriverError
from provisioning.storage import services
from provisioning.storage.models import Bucket, BucketEvent, Credential
from provisioning.storage.s3ops import make_client
from provisioning.storage.services import (
    bucket_retain,
    buckets_delete_expired,
    credential_reveal,
    credential_rotate,
    storage_revoke,
    storage_setup,
)
from provisioning.storage.states import BucketState
from tests.provisioning.storage.conftest import make_storage_order


def _s3(embedded_s3, access_key_id, secret):
    return make_client("s3", endpoint_url=embedded_s3.endpoint_url, region="us-east-1",
                       access_key=access_key_id, secret_key=secret)


def _refused(s3, bucket) -> str:
    with pytest.raises(ClientError) as refused:
        s3.list_objects_v2(Bucket=bucket)
    return refused.value.response["Error"]["Code"]


def test_rotation_replaces_the_key_and_revokes_the_old_one_after(db, order, embedded_s3, log):
    first = storage_setup(order=order)
    old = Credential.objects.get(bucket__order=order, active=True)
    old_secret = old.secret
    rotated = credential_rotate(order=order, log=log)
    new = Credential.objects.get(bucket__order=order, active=True)
    assert rotated.access_key_id == new.access_key_id != first.access_key_id
    old.refresh_from_db()
    assert not old.active and old.revoked_at is not None and old.secret == ""
    assert _refused(_s3(embedded_s3, old.access_key_id, old_secret), first.bucket) == "InvalidAccessKeyId"
    _s3(embedded_s3, new.access_key_id, new.secret).list_objects_v2(Bucket=first.bucket)
    assert old_secret not in "\n".join(log) and new.secret not in "\n".join(log)


def test_old_key_stays_when_the_new_one_fails_verification(db, order, embedded_s3, admin_iam,
                                                            monkeypatch):
    first = storage_setup(order=order)
    old = Credential.objects.get(bucket__order=order, active=True)

    def broken_verify(*args, **kwargs):
        raise DriverError("verify: the object read back differs", permanent=False)

    monkeypatch.setattr(services, "verify", broken_verify)
    with pytest.raises(DriverError):
        credential_rotate(order=order)
    assert list(Credential.objects.filter(bucket__order=order)) == [old]
    assert Credential.objects.get(pk=old.pk).active
    _s3(embedded_s3, old.access_key_id, old.secret).list_objects_v2(Bucket=first.bucket)
    users = [u["UserName"] for u in admin_iam.list_users(PathPrefix="/trainyard/")["Users"]
             if u["UserName"].startswith(first.bucket + "-")]
    assert len(users) == 1  # the unverified key's IAM user was removed


def test_rotation_redelivered_after_it_happened_does_not_rotate_again(db, order):
    storage_setup(order=order)
    started = timezone.now()
    once = credential_rotate(order=order, since=started)
    again = credential_rotate(order=order, since=started)
    assert once.access_key_id == again.access_key_id
    assert Credential.objects.filter(bucket__order=order).count() == 2


def test_revoke_on_termination_refuses_the_key_and_is_idempotent(db, order, embedded_s3):
    result = storage_setup(order=order)
    cred = Credential.objects.get(bucket__order=order, active=True)
    secret = cred.secret
    assert storage_revoke(order=order) == 1
    assert storage_revoke(order=order) == 0
    assert _refused(_s3(embedded_s3, cred.access_key_id, secret), result.bucket) == "InvalidAccessKeyId"


def test_secret_is_revealed_once(db, order):
    storage_setup(order=order)
    key_id, secret = credential_reveal(order=order)
    assert key_id and secret
    assert credential_reveal(order=order) is None
    assert Credential.objects.get(bucket__order=order, active=True).revealed_at is not None


def test_retained_bucket_is_kept_until_its_date_then_deleted(db, order, admin_s3):
    result = storage_setup(order=order)
    admin_s3.put_object(Bucket=result.bucket, Key="ckpt/final.pt", Body=b"x" * 1024)
    storage_revoke(order=order)
    now = timezone.now()
    bucket = bucket_retain(order=order, until=now + timedelta(days=30))
    assert bucket.state == BucketState.RETAINED

    report = buckets_delete_expired(now=now + timedelta(days=29, hours=23))
    assert report.deleted == ()
    assert admin_s3.get_object(Bucket=result.bucket, Key="ckpt/final.pt")["Body"].read() == b"x" * 1024

    report = buckets_delete_expired(now=now + timedelta(days=30, seconds=1))
    assert report.deleted == (result.bucket,)
    with pytest.raises(ClientError):
        admin_s3.head_bucket(Bucket=result.bucket)
    assert Bucket.objects.get(order=order).state == BucketState.DELETED
    assert [e.transition for e in BucketEvent.objects.filter(bucket__order=order)] == ["retain", "delete"]
    assert buckets_delete_expired(now=now + timedelta(days=31)).deleted == ()


def test_retention_default_follows_settings(db, storage_provider, settings):
    settings.STORAGE_RETENTION_DAYS = 10  # the default of the order's own choice
    order = make_storage_order(storage_provider=storage_provider, storage_tb=1)
    assert order.storage_retention_days == 10
    storage_setup(order=order)
    settings.STORAGE_RETENTION_DAYS = 20  # later changes do not touch placed orders
    before = timezone.now()
    bucket = bucket_retain(order=order)
    assert timedelta(days=10) <= bucket.retain_until - before < timedelta(days=10, minutes=1)


def test_provider_refuses_to_delete_a_non_empty_bucket_unless_forced(db, order, storage_provider, admin_s3):
    from provisioning.storage.registry import provider_for

    result = storage_setup(order=order)
    admin_s3.put_object(Bucket=result.bucket, Key="keep.pt", Body=b"1")
    adapter = provider_for(storage_provider)
    with pytest.raises(DriverError) as refused:
        adapter.delete_bucket(result.bucket)
    assert refused.value.permanent and "not empty" in refused.value.message
    admin_s3.head_object(Bucket=result.bucket, Key="keep.pt")
    assert adapter.delete_bucket(result.bucket, force=True) is True
    assert adapter.delete_bucket(result.bucket) is False


def test_storage_view_shows_key_id_and_whether_the_secret_is_still_revealable(db, order):
    from provisioning.storage.selectors import storage_for

    assert storage_for(order) is None
    result = storage_setup(order=order)
    view = storage_for(order)
    assert (view.bucket, view.access_key_id, view.secret_revealable) == (
        result.bucket, result.access_key_id, True)
    credential_reveal(order=order)
    assert storage_for(order).secret_revealable is False
    assert not any("secret" in f for f in vars(view) if f != "secret_revealable")
