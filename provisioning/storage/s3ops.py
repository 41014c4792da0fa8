"""Bucket operations through the S3 API with the provider's admin key, shared by the MinIO and
IAM adapters: create-or-adopt, versioning, lifecycle, default encryption, public-access block,
read-back, and delete (refusing a non-empty bucket unless forced)."""

from __future__ import annotations

from dataclasses import dataclass

import boto3
from botocore.awsrequest import AWSHTTPConnectionPool, AWSHTTPSConnectionPool
from botocore.config import Config
from botocore.exceptions import BotoCoreError, ClientError, EndpointConnectionError
from botocore.httpsession import URLLib3Session

from portal.core.addresses import guarded_pool_classes, unsafe_cause
from provisioning.drivers.base import DriverError
from provisioning.storage.base import BucketReport, LifecyclePolicy, LogFn, _no_log
from provisioning.storage.errors import (
    UnsafeEndpointError,
    error_code,
    from_sdk_error,
    http_status,
    translated,
)

DEFAULT_REGION = "us-east-1"
# Answers meaning "this provider does not offer that setting": recorded as skipped, not failed.
UNSUPPORTED_CODES = frozenset({"NotImplemented", "MalformedXML", "InvalidArgument", "InvalidRequest",
                               "XNotImplemented", "UnsupportedOperation", "NotSupported",
                               "XMinioKMSNotConfigured", "KMS.NotConfigured"})


def make_client(service: str, *, endpoint_url: str, region: str, access_key: str, secret_key: str,
                addressing_style: str = "path", max_attempts: int = 2, connect_timeout: float = 5,
                guarded: bool = False, verify: bool | str | None = None):
    """A client of its own session (boto3's default session is not thread-safe).

    ``guarded``: the endpoint is a customer's (not the operator's): every connection goes only
    to an address the portal's rule allows (``portal.core.addresses``: resolved once, checked,
    connected to; TLS verifies the endpoint's name), never through a proxy; a refused address is
    an ``UnsafeEndpointError``. ``verify``: a CA bundle's path instead of the default ones
    (a guarded client always verifies certificates)."""
    config = Config(region_name=region or DEFAULT_REGION, signature_version="s3v4",
                    s3={"addressing_style": addressing_style or "path"},
                    retries={"max_attempts": max_attempts, "mode": "standard"},
                    connect_timeout=connect_timeout, read_timeout=60,
                    proxies={} if guarded else None)
    client = boto3.session.Session().client(
        service, endpoint_url=endpoint_url or None, aws_access_key_id=access_key or None,
        aws_secret_access_key=secret_key or None, config=config, verify=verify)
    if guarded:
        http = GuardedURLLib3Session(timeout=(connect_timeout, 60),
                                     verify=True if verify in (None, False) else verify)
        # botocore's hook for sending a request itself: every request goes through ``http``.
        client.meta.events.register_first("before-send", lambda request, **_: http.send(request))
    return client


class GuardedURLLib3Session(URLLib3Session):
    """botocore's HTTP session whose connections go to checked addresses only, with no proxy."""

    POOLS = guarded_pool_classes(AWSHTTPConnectionPool, AWSHTTPSConnectionPool)

    def __init__(self, **kwargs):
        super().__init__(**kwargs, proxies={})
        self._pool_classes_by_scheme = self.POOLS
        self._manager.pool_classes_by_scheme = self.POOLS

    def send(self, request):
        try:
            return super().send(request)
        except EndpointConnectionError as exc:
            unsafe = unsafe_cause(exc.kwargs.get("error"))
            if unsafe is None:
                raise
            raise UnsafeEndpointError(endpoint_url=request.url, reason=str(unsafe)) from None


def lifecycle_rules(policy: LifecyclePolicy, *, keep_versions: bool = True) -> list[dict]:
    noncurrent = {"NoncurrentDays": policy.noncurrent_days}
    if keep_versions:
        noncurrent["NewerNoncurrentVersions"] = policy.keep_versions
    return [
        {"ID": "trainyard-noncurrent-versions", "Status": "Enabled", "Filter": {"Prefix": ""},
         "NoncurrentVersionExpiration": noncurrent},
        {"ID": "trainyard-abort-multipart", "Status": "Enabled", "Filter": {"Prefix": ""},
         "AbortIncompleteMultipartUpload": {"DaysAfterInitiation": policy.abort_multipart_days}},
    ]


@dataclass
class S3Buckets:
    """Admin-side bucket work on one S3 endpoint."""

    client: object
    region: str = ""
    supports_public_access_block: bool = True

    # --- create or adopt -----------------------------------------------------------------
    def ensure(self, name: str, *, versioning: bool, lifecycle: LifecyclePolicy | None,
               encryption: bool, log: LogFn) -> BucketReport:
        created = self._create_or_adopt(name, log)
        skipped: list[str] = []
        if versioning:
            with translated(f"enable versioning on {name}"):
                self.client.put_bucket_versioning(
                    Bucket=name, VersioningConfiguration={"Status": "Enabled"})
            log(f"versioning enabled on {name}")
        if lifecycle is not None:
            skipped += self._lifecycle(name, lifecycle, log)
        if encryption:
            skipped += self._optional(
                "default-encryption", name, log, self.client.put_bucket_encryption,
                Bucket=name, ServerSideEncryptionConfiguration={"Rules": [
                    {"ApplyServerSideEncryptionByDefault": {"SSEAlgorithm": "AES256"}}]})
        if self.supports_public_access_block:
            skipped += self._optional(
                "public-access-block", name, log, self.client.put_public_access_block,
                Bucket=name, PublicAccessBlockConfiguration={
                    "BlockPublicAcls": True, "IgnorePublicAcls": True,
                    "BlockPublicPolicy": True, "RestrictPublicBuckets": True})
        else:
            skipped.append("public-access-block")
        return BucketReport(name=name, created=created, skipped=tuple(skipped))

    def _create_or_adopt(self, name: str, log: LogFn) -> bool:
        state = self.head(name)
        if state == "ours":
            log(f"bucket {name} exists and is ours: adopting it")
            return False
        if state == "foreign":
            raise _foreign(name)
        kwargs = {"Bucket": name}
        if self.region and self.region != DEFAULT_REGION:
            kwargs["CreateBucketConfiguration"] = {"LocationConstraint": self.region}
        try:
            self.client.create_bucket(**kwargs)
        except ClientError as exc:
            code = error_code(exc)
            if code == "BucketAlreadyOwnedByYou":
                log(f"bucket {name} exists and is ours: adopting it")
                return False
            if code == "BucketAlreadyExists":
                raise _foreign(name) from None
            raise from_sdk_error(exc, f"create bucket {name}") from None
        except BotoCoreError as exc:
            raise from_sdk_error(exc, f"create bucket {name}") from None
        log(f"bucket {name} created")
        return True

    def head(self, name: str) -> str:
        """'missing', 'ours' or 'foreign' (exists, and the admin key may not see it)."""
        try:
            self.client.head_bucket(Bucket=name)
        except ClientError as exc:
            status = http_status(exc)
            if status == 404 or error_code(exc) in {"404", "NoSuchBucket"}:
                return "missing"
            if status == 403:
                return "foreign"
            raise from_sdk_error(exc, f"look up bucket {name}") from None
        except BotoCoreError as exc:
            raise from_sdk_error(exc, f"look up bucket {name}") from None
        with translated(f"list buckets to confirm {name} is ours"):
            owned = {b["Name"] for b in self.client.list_buckets().get("Buckets", [])}
        return "ours" if name in owned else "foreign"

    # --- settings --------------------------------------------------------------------------
    def _lifecycle(self, name: str, policy: LifecyclePolicy, log: LogFn) -> list[str]:
        put = self.client.put_bucket_lifecycle_configuration
        skipped = self._optional("lifecycle", name, log, put, Bucket=name,
                                 LifecycleConfiguration={"Rules": lifecycle_rules(policy)})
        if skipped:  # some providers lack NewerNoncurrentVersions: keep the age rule at least
            skipped = self._optional(
                "lifecycle", name, log, put, Bucket=name,
                LifecycleConfiguration={"Rules": lifecycle_rules(policy, keep_versions=False)})
            if not skipped:
                return ["lifecycle-keep-versions"]
        return skipped

    def _optional(self, feature: str, name: str, log: LogFn, call, **kwargs) -> list[str]:
        try:
            call(**kwargs)
        except ClientError as exc:
            if error_code(exc) in UNSUPPORTED_CODES or http_status(exc) == 501:
                log(f"{feature} not offered by this provider on {name} ({error_code(exc)}): skipped")
                return [feature]
            raise from_sdk_error(exc, f"set {feature} on {name}") from None
        except BotoCoreError as exc:
            raise from_sdk_error(exc, f"set {feature} on {name}") from None
        log(f"{feature} set on {name}")
        return []

    def settings(self, name: str) -> dict:
        """Reads back versioning, lifecycle, encryption and public-access block (for tests/staff)."""
        out: dict = {}
        with translated(f"read settings of {name}"):
            out["versioning"] = self.client.get_bucket_versioning(Bucket=name).get("Status", "")
            out["lifecycle"] = _or_none(lambda: self.client.get_bucket_lifecycle_configuration(
                Bucket=name)["Rules"])
            out["encryption"] = _or_none(lambda: self.client.get_bucket_encryption(
                Bucket=name)["ServerSideEncryptionConfiguration"]["Rules"])
            out["public_access_block"] = _or_none(lambda: self.client.get_public_access_block(
                Bucket=name)["PublicAccessBlockConfiguration"])
        return out

    # --- delete ----------------------------------------------------------------------------
    def is_empty(self, name: str) -> bool:
        with translated(f"list {name}"):
            versions = self.client.list_object_versions(Bucket=name, MaxKeys=1)
            uploads = self.client.list_multipart_uploads(Bucket=name, MaxUploads=1)
        return not (versions.get("Versions") or versions.get("DeleteMarkers")
                    or uploads.get("Uploads"))

    def delete(self, name: str, *, force: bool, log: LogFn) -> bool:
        if self.head(name) == "missing":
            log(f"bucket {name} is already gone")
            return False
        if not self.is_empty(name):
            if not force:
                raise DriverError(f"bucket {name} is not empty: refusing to delete it", permanent=True)
            self._empty(name, log)
        with translated(f"delete bucket {name}"):
            self.client.delete_bucket(Bucket=name)
        log(f"bucket {name} deleted")
        return True

    def _empty(self, name: str, log: LogFn) -> None:
        with translated(f"empty bucket {name}"):
            for page in self.client.get_paginator("list_object_versions").paginate(Bucket=name):
                doomed = [{"Key": v["Key"], "VersionId": v["VersionId"]}
                          for v in page.get("Versions", []) + page.get("DeleteMarkers", [])]
                if doomed:
                    self.client.delete_objects(Bucket=name, Delete={"Objects": doomed, "Quiet": True})
            for page in self.client.get_paginator("list_multipart_uploads").paginate(Bucket=name):
                for upload in page.get("Uploads", []):
                    self.client.abort_multipart_upload(Bucket=name, Key=upload["Key"],
                                                       UploadId=upload["UploadId"])
        log(f"bucket {name} emptied (forced)")


class S3BucketAdmin:
    """Bucket administration over the S3 API, shared by the providers whose buckets are plain S3
    buckets (IAM-based and MinIO): needs ``self.config`` and ``self.buckets`` (an S3Buckets)."""

    def canary_bucket(self) -> str | None:
        return self.config.options.get("canary_bucket") or None

    def ensure_bucket(self, name: str, *, versioning: bool = True,
                      lifecycle: LifecyclePolicy | None = None, encryption: bool = True,
                      log: LogFn = _no_log) -> BucketReport:
        return self.buckets.ensure(name, versioning=versioning, lifecycle=lifecycle,
                                   encryption=encryption, log=log)

    def delete_bucket(self, name: str, *, force: bool = False, log: LogFn = _no_log) -> bool:
        return self.buckets.delete(name, force=force, log=log)


def _foreign(name: str) -> DriverError:
    return DriverError(f"bucket name {name} is taken by another account on this provider: choose "
                       f"another STORAGE_BUCKET_PREFIX or remove the other bucket", permanent=True)


def _or_none(read):
    try:
        return read()
    except ClientError as exc:
        if http_status(exc) == 404 or error_code(exc).startswith("NoSuch") or error_code(exc) in {
                "ServerSideEncryptionConfigurationNotFoundError", "NoSuchPublicAccessBlockConfiguration"}:
            return None
        raise
