"""On-site MinIO: buckets through the S3 API, customer keys as service accounts of the admin user
with an inline policy limiting them to one bucket (MinIO admin API via ``minio.MinioAdmin``).

Options: ``admin_endpoint_url`` (default: the S3 endpoint), ``canary_bucket``.
We choose the service account's access key ourselves, so a request that fails after MinIO
created the account can still be cleaned up by that key."""

from __future__ import annotations

import json
import secrets
from urllib.parse import urlsplit

import urllib3
from minio.credentials import StaticProvider
from minio.error import MinioAdminException
from minio.minioadmin import MinioAdmin

from provisioning.drivers.base import DriverError
from provisioning.storage.base import (
    IssuedCredential,
    LogFn,
    ProviderConfig,
    _no_log,
)
from provisioning.storage.policy import bucket_policy
from provisioning.storage.s3ops import S3BucketAdmin, S3Buckets, make_client

NOT_FOUND_CODES = ("XMinioAdminNoSuchServiceAccount", "XMinioAdminNoSuchUser", "NoSuchServiceAccount")


class MinioProvider(S3BucketAdmin):
    creates_buckets = True

    def __init__(self, config: ProviderConfig) -> None:
        if not (config.access_key and config.secret_key):
            raise DriverError(f"storage provider {config.slug!r} has no admin credentials: set "
                              f"STORAGE_MINIO_ACCESS_KEY and STORAGE_MINIO_SECRET_KEY (docs/storage.md)",
                              permanent=True)
        if not config.endpoint_url:
            raise DriverError(f"storage provider {config.slug!r} has no endpoint: set "
                              f"STORAGE_MINIO_ENDPOINT_URL (e.g. http://minio:9000)", permanent=True)
        self.config = config
        self._s3 = self._client()
        # MinIO has no public-access block: buckets are private unless a policy says otherwise.
        self.buckets = S3Buckets(self._s3, region=config.region, supports_public_access_block=False)
        admin_url = urlsplit(config.options.get("admin_endpoint_url") or config.endpoint_url)
        self.admin = MinioAdmin(
            endpoint=admin_url.netloc, secure=admin_url.scheme == "https",
            credentials=StaticProvider(config.access_key, config.secret_key),
            region=config.region or "",
            # One attempt: the pipeline retries with backoff, and says so in the step log.
            http_client=urllib3.PoolManager(timeout=urllib3.Timeout(connect=5, read=60),
                                            retries=False))

    def _client(self, credential: IssuedCredential | None = None):
        c = self.config
        return make_client("s3", endpoint_url=c.endpoint_url, region=c.region,
                           addressing_style=c.addressing_style,
                           access_key=credential.access_key_id if credential else c.access_key,
                           secret_key=credential.secret_access_key if credential else c.secret_key)

    def s3_client(self, credential: IssuedCredential | None = None):
        return self._s3 if credential is None else self._client(credential)

    def issue_credential(self, bucket: str, *, read_only: bool = False,
                         log: LogFn = _no_log) -> IssuedCredential:
        access_key = "TY" + secrets.token_hex(9).upper()  # 20 characters, MinIO's maximum
        secret_key = secrets.token_urlsafe(30)[:40]
        try:
            answer = self.admin.add_service_account(
                access_key=access_key, secret_key=secret_key,
                policy=bucket_policy(bucket, read_only=read_only),
                description=(f"trainyard: {'read-only ' if read_only else ''}objects of bucket "
                             f"{bucket}")[:256])
        except Exception as exc:
            error = admin_error(exc, f"issue a key for {bucket}")
            self._delete_quietly(access_key, log)
            raise error from None
        _check_answer(answer, access_key)
        log(f"MinIO service account {access_key} created, scoped to {bucket}")
        return IssuedCredential(access_key_id=access_key, secret_access_key=secret_key,
                                bucket=bucket, handle=access_key)

    def revoke_credential(self, credential: IssuedCredential, *, log: LogFn = _no_log) -> None:
        try:
            self.admin.delete_service_account(credential.access_key_id)
        except Exception as exc:
            if not _is_not_found(exc):
                raise admin_error(exc, f"revoke key {credential.access_key_id}") from None
        log(f"MinIO service account {credential.access_key_id} deleted")

    def _delete_quietly(self, access_key: str, log: LogFn) -> None:
        try:
            self.admin.delete_service_account(access_key)
            log(f"removed half-created service account {access_key}")
        except Exception as exc:
            if not _is_not_found(exc):
                log(f"could not confirm service account {access_key} is gone "
                    f"({type(exc).__name__}); it has no secret anyone knows")


def _check_answer(answer: str, access_key: str) -> None:
    try:
        data = json.loads(answer or "{}")
    except ValueError:
        return  # the key and secret are ours; a terse answer is fine
    got = (data.get("credentials") or data).get("accessKey")
    if got and got != access_key:
        raise DriverError(f"MinIO created service account {got}, not the requested {access_key}",
                          permanent=True)


def _is_not_found(exc: Exception) -> bool:
    return isinstance(exc, MinioAdminException) and (
        exc._code == "404" or any(c in (exc._body or "") for c in NOT_FOUND_CODES))


def admin_error(exc: Exception, what: str) -> DriverError:
    """MinIO admin answers and transport failures as DriverError."""
    if isinstance(exc, DriverError):
        return exc
    if isinstance(exc, MinioAdminException):
        status = int(exc._code) if str(exc._code).isdigit() else 0
        code, message = _admin_body(exc._body)
        if status >= 500 or status == 429 or code in {"XMinioServerNotInitialized", "SlowDown"}:
            return DriverError(f"{what}: MinIO is busy or failing (HTTP {status} {code}); will retry",
                               permanent=False)
        if status in (401, 403) or code in {"AccessDenied", "XMinioAdminNoAccess",
                                             "InvalidAccessKeyId", "SignatureDoesNotMatch"}:
            return DriverError(f"{what}: MinIO refused the admin key ({code or status}: {message}). "
                               f"Check STORAGE_MINIO_ACCESS_KEY/_SECRET_KEY and that the user may "
                               f"manage service accounts.", permanent=True)
        return DriverError(f"{what}: MinIO answered HTTP {status} {code}: {message}", permanent=True)
    if isinstance(exc, urllib3.exceptions.HTTPError | OSError):
        return DriverError(f"{what}: cannot reach the MinIO admin API ({type(exc).__name__}); "
                           f"will retry", permanent=False)
    if isinstance(exc, ValueError):  # e.g. the answer could not be decrypted
        return DriverError(f"{what}: unreadable answer from the MinIO admin API ({exc})", permanent=False)
    return DriverError(f"{what}: {type(exc).__name__}: {exc}", permanent=False)


def _admin_body(body: str) -> tuple[str, str]:
    try:
        data = json.loads(body or "{}")
    except ValueError:
        return "", (body or "")[:200]
    return str(data.get("Code", "")), str(data.get("Message", ""))[:300]
