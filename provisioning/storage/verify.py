"""Proves an issued key works on its bucket and nowhere else, with the key itself: put, get
(SHA-256 compared), list, delete a test object; then a list and a put on another bucket must both
be refused. Any SDK error becomes a DriverError (transient or permanent)."""

from __future__ import annotations

import hashlib
import os
import time
import uuid
from dataclasses import dataclass

from botocore.exceptions import BotoCoreError, ClientError

from provisioning.drivers.base import DriverError
from provisioning.storage.base import LogFn, _no_log
from provisioning.storage.errors import error_code, from_sdk_error, http_status, translated

PROBE_PREFIX = ".trainyard-verify/"
# Codes a brand-new key answers while the provider is still propagating it.
NOT_YET_CODES = frozenset({"InvalidAccessKeyId", "AccessDenied", "SignatureDoesNotMatch",
                           "InvalidClientTokenId"})


@dataclass(frozen=True)
class VerifyReport:
    bucket: str
    sha256: str
    checks: tuple[str, ...]  # what was proven, in order
    refused_on: str = ""  # the other bucket the key could not reach ("" = not checked)


def verify(client, bucket: str, *, other_bucket: str | None, propagation_s: float = 0,
           log: LogFn = _no_log) -> VerifyReport:
    """``client``: an S3 client built with the ISSUED key (``provider.s3_client(credential)``)."""
    key = f"{PROBE_PREFIX}{uuid.uuid4().hex}"
    body = os.urandom(64 * 1024)
    digest = hashlib.sha256(body).hexdigest()
    checks = []
    _put_when_ready(client, bucket, key, body, propagation_s, log)
    checks.append("put")
    with translated(f"verify: get {key} from {bucket}"):
        got = client.get_object(Bucket=bucket, Key=key)["Body"].read()
    if hashlib.sha256(got).hexdigest() != digest:
        raise DriverError(f"verify: the object read back from {bucket} differs from what was "
                          f"written (SHA-256 mismatch)", permanent=False)
    checks.append("get-sha256")
    with translated(f"verify: list {bucket}"):
        listed = client.list_objects_v2(Bucket=bucket, Prefix=key).get("Contents", [])
    if not any(o["Key"] == key for o in listed):
        raise DriverError(f"verify: {key} was written to {bucket} but is not listed", permanent=False)
    checks.append("list")
    _delete_all_versions(client, bucket, key)
    checks.append("delete")
    log(f"verified with key on {bucket}: put, get (sha256 {digest[:12]}…), list, delete")
    if other_bucket:
        _expect_refused(client, other_bucket)
        checks.append("refused-elsewhere")
        log(f"verified the key is refused on another bucket ({other_bucket})")
    return VerifyReport(bucket=bucket, sha256=digest, checks=tuple(checks),
                        refused_on=other_bucket or "")


def _put_when_ready(client, bucket, key, body, propagation_s: float, log: LogFn) -> None:
    deadline = time.monotonic() + propagation_s
    delay = 0.2
    while True:
        try:
            client.put_object(Bucket=bucket, Key=key, Body=body)
            return
        except ClientError as exc:
            code = error_code(exc)
            if code in NOT_YET_CODES:
                if time.monotonic() < deadline:
                    time.sleep(delay)
                    delay = min(delay * 2, 2.0)
                    continue
                raise DriverError(f"verify: the issued key is refused on its own bucket {bucket} "
                                  f"({code})", permanent=False) from None
            raise from_sdk_error(exc, f"verify: put a test object into {bucket}") from None
        except BotoCoreError as exc:
            raise from_sdk_error(exc, f"verify: put a test object into {bucket}") from None


def _delete_all_versions(client, bucket: str, key: str) -> None:
    with translated(f"verify: delete {key} from {bucket}"):
        client.delete_object(Bucket=bucket, Key=key)
        versions = client.list_object_versions(Bucket=bucket, Prefix=key)
        for v in versions.get("Versions", []) + versions.get("DeleteMarkers", []):
            if v["Key"] == key and v.get("VersionId") not in (None, "null"):
                client.delete_object(Bucket=bucket, Key=key, VersionId=v["VersionId"])


def _expect_refused(client, other: str) -> None:
    probes = (("list", lambda: client.list_objects_v2(Bucket=other, MaxKeys=1)),
              ("put", lambda: client.put_object(Bucket=other, Key=f"{PROBE_PREFIX}scope", Body=b"x")))
    for what, call in probes:
        try:
            call()
        except ClientError as exc:
            if http_status(exc) == 403 or error_code(exc) == "AccessDenied":
                continue
            if http_status(exc) == 404:
                raise DriverError(f"verify: the scope check bucket {other} does not exist",
                                  permanent=True) from None
            raise from_sdk_error(exc, f"verify: {what} on {other}") from None
        except BotoCoreError as exc:
            raise from_sdk_error(exc, f"verify: {what} on {other}") from None
        raise DriverError(f"verify: the issued key could {what} on another bucket ({other}): it is "
                          f"not scoped to its own bucket; refusing it", permanent=True)


def verify_read_only(client, bucket: str, *, other_bucket: str | None, propagation_s: float = 0,
                     log: LogFn = _no_log) -> VerifyReport:
    """A read-only key (a retained bucket's): it lists its bucket, and a write to it and any
    access to another bucket are refused."""
    deadline = time.monotonic() + propagation_s
    delay = 0.2
    while True:
        try:
            client.list_objects_v2(Bucket=bucket, MaxKeys=1)
            break
        except ClientError as exc:
            if error_code(exc) in NOT_YET_CODES and time.monotonic() < deadline:
                time.sleep(delay)
                delay = min(delay * 2, 2.0)
                continue
            raise from_sdk_error(exc, f"verify: list {bucket} with the read-only key") from None
        except BotoCoreError as exc:
            raise from_sdk_error(exc, f"verify: list {bucket} with the read-only key") from None
    checks = ["list"]
    try:
        client.put_object(Bucket=bucket, Key=f"{PROBE_PREFIX}read-only", Body=b"x")
    except ClientError as exc:
        if not (http_status(exc) == 403 or error_code(exc) == "AccessDenied"):
            raise from_sdk_error(exc, f"verify: put into {bucket} with the read-only key") from None
    except BotoCoreError as exc:
        raise from_sdk_error(exc, f"verify: put into {bucket} with the read-only key") from None
    else:
        raise DriverError(f"verify: the read-only key could write to {bucket}; refusing it",
                          permanent=True)
    checks.append("put-refused")
    if other_bucket:
        _expect_refused(client, other_bucket)
        checks.append("refused-elsewhere")
    log(f"verified the read-only key on {bucket}: list works, writes are refused")
    return VerifyReport(bucket=bucket, sha256="", checks=tuple(checks),
                        refused_on=other_bucket or "")
