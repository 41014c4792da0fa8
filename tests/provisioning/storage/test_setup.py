"""Bucket set-up against a real S3+IAM server on loopback (moto, IAM authorisation enforced)."""

import threading

import pytest
from botocore.exceptions import ClientError
from django.db import connection

from provisioning.drivers.base import DriverError
from provisioning.storage.models import Bucket, Credential
from provisioning.storage.s3ops import S3Buckets, make_client
from provisioning.storage.services import StorageResult, bucket_name_for, storage_setup
from tests.provisioning.storage.conftest import make_storage_order


def _client_for(embedded_s3, cred):
    return make_client("s3", endpoint_url=embedded_s3.endpoint_url, region="us-east-1",
                       access_key=cred.access_key_id, secret_key=cred.secret)


def _users_for(admin_iam, bucket: str) -> list[str]:
    users = admin_iam.list_users(PathPrefix="/trainyard/")["Users"]
    return [u["UserName"] for u in users if u["UserName"].startswith(bucket + "-")]


def test_bucket_name_is_valid_predictable_and_per_order(db, storage_provider, order, settings):
    name = bucket_name_for(order)
    assert name == f"{settings.STORAGE_BUCKET_PREFIX}-{order.reference.lower()}"
    assert name == bucket_name_for(order)
    assert 3 <= len(name) <= 63 and name == name.lower() and name[0].isalnum() and name[-1].isalnum()
    other = make_storage_order(storage_provider=storage_provider)
    assert bucket_name_for(other) != name


def test_setup_creates_bucket_and_one_verified_key_and_repeats_idempotently(
        db, order, storage_provider, admin_iam, log):
    first = storage_setup(order=order, log=log)
    second = storage_setup(order=order, log=log)
    assert first == second
    assert first.bucket == bucket_name_for(order)
    assert Bucket.objects.filter(order=order).count() == 1
    assert Credential.objects.filter(bucket__order=order, active=True).count() == 1
    assert len(_users_for(admin_iam, first.bucket)) == 1
    assert any("refused on another bucket" in line for line in log)


def test_issued_key_works_on_its_bucket_and_is_refused_on_another(
        db, order, storage_provider, embedded_s3, admin_s3):
    result = storage_setup(order=order)
    other = make_storage_order(storage_provider=storage_provider)
    other_result = storage_setup(order=other)
    cred = Credential.objects.get(bucket__order=order, active=True)
    s3 = _client_for(embedded_s3, cred)
    s3.put_object(Bucket=result.bucket, Key="ckpt/step-1.pt", Body=b"weights")
    assert s3.get_object(Bucket=result.bucket, Key="ckpt/step-1.pt")["Body"].read() == b"weights"
    for call in (lambda: s3.list_objects_v2(Bucket=other_result.bucket),
                 lambda: s3.get_object(Bucket=other_result.bucket, Key="x"),
                 lambda: s3.put_object(Bucket=other_result.bucket, Key="x", Body=b"x"),
                 lambda: s3.delete_bucket(Bucket=result.bucket),
                 lambda: s3.put_bucket_versioning(Bucket=result.bucket,
                                                  VersioningConfiguration={"Status": "Suspended"})):
        with pytest.raises(ClientError) as refused:
            call()
        assert refused.value.response["Error"]["Code"] == "AccessDenied"
    admin_s3.head_object(Bucket=result.bucket, Key="ckpt/step-1.pt")


def test_an_unknown_key_is_refused_outright(db, embedded_s3):
    s3 = make_client("s3", endpoint_url=embedded_s3.endpoint_url, region="us-east-1",
                     access_key="AKIANOBODY0000000000", secret_key="nope")
    with pytest.raises(ClientError) as refused:
        s3.list_buckets()
    assert refused.value.response["Error"]["Code"] == "InvalidAccessKeyId"


def test_versioning_lifecycle_encryption_and_public_block_are_set(db, order, admin_s3, settings):
    result = storage_setup(order=order)
    read = S3Buckets(admin_s3).settings(result.bucket)
    assert read["versioning"] == "Enabled"
    rules = {r["ID"]: r for r in read["lifecycle"]}
    assert rules["trainyard-noncurrent-versions"]["NoncurrentVersionExpiration"]["NoncurrentDays"] \
        == settings.STORAGE_NONCURRENT_DAYS
    assert rules["trainyard-abort-multipart"]["AbortIncompleteMultipartUpload"] == {
        "DaysAfterInitiation": 7}
    assert read["encryption"][0]["ApplyServerSideEncryptionByDefault"]["SSEAlgorithm"] == "AES256"
    assert read["public_access_block"] == {"BlockPublicAcls": True, "IgnorePublicAcls": True,
                                           "BlockPublicPolicy": True, "RestrictPublicBuckets": True}


def test_lifecycle_asks_to_keep_the_newest_versions(settings):
    # moto accepts NewerNoncurrentVersions but does not echo it back, so the request is checked.
    from provisioning.storage.s3ops import lifecycle_rules
    from provisioning.storage.services import lifecycle_policy

    settings.STORAGE_KEEP_VERSIONS = 5
    rule = lifecycle_rules(lifecycle_policy())[0]
    assert rule["NoncurrentVersionExpiration"]["NewerNoncurrentVersions"] == 5


def test_concurrent_setups_for_one_order_make_one_bucket_and_one_key(
        require_postgres, transactional_db, storage_provider, admin_iam):
    order = make_storage_order(storage_provider=storage_provider, storage_tb=1)
    barrier = threading.Barrier(3)
    results, errors = [], []

    def step():
        try:
            barrier.wait(timeout=30)
            results.append(storage_setup(order=order))
        except Exception as exc:  # noqa: BLE001 - reported below
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=step) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not errors, errors
    assert len(results) == 3 and len(set(results)) == 1
    assert Bucket.objects.filter(order=order).count() == 1
    assert Credential.objects.filter(bucket__order=order).count() == 1
    assert len(_users_for(admin_iam, results[0].bucket)) == 1


def test_result_and_logs_carry_no_secret(db, order, log, caplog):
    result = storage_setup(order=order, log=log)
    secret = Credential.objects.get(bucket__order=order, active=True).secret
    assert len(secret) >= 20
    blob = repr(result) + str(result.to_dict()) + "\n".join(log) + caplog.text
    assert secret not in blob
    assert StorageResult.from_dict(result.to_dict()) == result
    assert set(result.to_dict()) == {"version", "bucket", "endpoint", "region", "access_key_id",
                                     "provider", "skipped"}


def test_secret_is_encrypted_at_rest(db, order):
    storage_setup(order=order)
    cred = Credential.objects.get(bucket__order=order, active=True)
    with connection.cursor() as cursor:
        cursor.execute("SELECT secret FROM provisioning_credential WHERE id = %s", [cred.pk])
        stored = cursor.fetchone()[0]
    assert cred.secret not in stored


def test_a_kind_without_adapter_or_admin_keys_fails_loudly_with_a_reason(
        db, order, storage_provider, settings):
    settings.STORAGE_PROVIDERS = {**settings.STORAGE_PROVIDERS,
                                  "minio": {**settings.STORAGE_PROVIDERS["minio"], "access_key": ""}}
    with pytest.raises(DriverError) as no_keys:
        storage_setup(order=order)
    assert no_keys.value.permanent and "admin credentials" in no_keys.value.message
    settings.STORAGE_PROVIDERS = {**settings.STORAGE_PROVIDERS, "minio": {}}
    settings.STORAGE_PROVIDER_ADAPTERS = {**settings.STORAGE_PROVIDER_ADAPTERS, "minio": ""}
    with pytest.raises(DriverError) as no_adapter:
        storage_setup(order=order)
    assert no_adapter.value.permanent and "STORAGE_PROVIDER_ADAPTERS" in no_adapter.value.message
