"""The customer's own S3 endpoint: they give endpoint, bucket and keys; we create nothing, only
prove the keys work on that bucket (put/get/list/delete) and hand them to the nodes. We never
revoke their keys nor delete their bucket.

The endpoint is the customer's, so it goes through the portal's rule for addresses
(``portal.core.addresses``): checked before any client is built, and every connection goes only
to a checked address of it (a guarded client), so a name that resolves elsewhere later (DNS
rebinding) reaches nothing internal either."""

from __future__ import annotations

from botocore.exceptions import BotoCoreError, ClientError

from portal.core.addresses import url_problem
from provisioning.drivers.base import DriverError
from provisioning.storage.base import (
    BucketReport,
    IssuedCredential,
    LifecyclePolicy,
    LogFn,
    ProviderConfig,
    _no_log,
)
from provisioning.storage.errors import from_sdk_error, http_status
from provisioning.storage.s3ops import make_client

NOT_MANAGED = ("versioning", "lifecycle", "default-encryption", "public-access-block")


class CustomProvider:
    """``config.access_key``/``secret_key`` are the CUSTOMER's keys (from the order, decrypted),
    ``config.endpoint_url`` their endpoint; ``options["bucket"]`` their bucket."""

    creates_buckets = False

    def __init__(self, config: ProviderConfig) -> None:
        missing = [n for n, v in (("endpoint", config.endpoint_url), ("bucket", config.options.get("bucket")),
                                  ("access key", config.access_key), ("secret key", config.secret_key))
                   if not v]
        if missing:
            raise DriverError(f"the order's own S3 endpoint lacks {', '.join(missing)}: the customer "
                              f"must give endpoint, bucket and keys", permanent=True)
        if problem := url_problem(config.endpoint_url):
            raise DriverError(f"the order's own S3 endpoint is refused: {problem}", permanent=True)
        self.config = config
        self.bucket = config.options["bucket"]
        self._s3 = self.s3_client()

    def s3_client(self, credential: IssuedCredential | None = None):
        c = self.config
        return make_client("s3", endpoint_url=c.endpoint_url, region=c.region,
                           addressing_style=c.addressing_style, guarded=True,
                           access_key=credential.access_key_id if credential else c.access_key,
                           secret_key=credential.secret_access_key if credential else c.secret_key)

    def canary_bucket(self) -> str | None:
        return None  # we own no other bucket there: the scope of their key is theirs to set

    def ensure_bucket(self, name: str, *, versioning: bool = True,
                      lifecycle: LifecyclePolicy | None = None, encryption: bool = True,
                      log: LogFn = _no_log) -> BucketReport:
        if name != self.bucket:
            raise DriverError(f"custom storage uses the customer's bucket {self.bucket}, not {name}",
                              permanent=True)
        state = _head_with_customer_key(self._s3, name)
        if state != "ok":
            raise DriverError(f"the customer's bucket {name} at {self.config.endpoint_url}: {state}",
                              permanent=True)
        log(f"customer bucket {name} reachable with the given keys (settings are the customer's)")
        return BucketReport(name=name, created=False, skipped=NOT_MANAGED)

    def issue_credential(self, bucket: str, *, read_only: bool = False,
                         log: LogFn = _no_log) -> IssuedCredential:
        if read_only:
            raise DriverError(f"bucket {bucket} is the customer's own: its keys are theirs",
                              permanent=True)
        return IssuedCredential(access_key_id=self.config.access_key,
                                secret_access_key=self.config.secret_key, bucket=bucket,
                                handle="customer")

    def revoke_credential(self, credential: IssuedCredential, *, log: LogFn = _no_log) -> None:
        log(f"key {credential.access_key_id} belongs to the customer: not revoked by us")

    def delete_bucket(self, name: str, *, force: bool = False, log: LogFn = _no_log) -> bool:
        log(f"bucket {name} belongs to the customer: not deleted by us")
        return False


def _head_with_customer_key(client, name: str) -> str:
    try:
        client.head_bucket(Bucket=name)
    except ClientError as exc:
        status = http_status(exc)
        if status == 404:
            return "does not exist"
        if status == 403:
            return "the given keys are refused (403)"
        raise from_sdk_error(exc, f"reach the customer's bucket {name}") from None
    except BotoCoreError as exc:
        raise from_sdk_error(exc, f"reach the customer's bucket {name}") from None
    return "ok"
