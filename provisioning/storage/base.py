"""The contract every bucket provider implements, and the values that cross it.

An adapter is built for one catalog provider: ``Adapter(config: ProviderConfig)``. Every method
may raise :class:`provisioning.drivers.base.DriverError`: ``permanent=False`` for what may pass
(endpoint down, 5xx, SlowDown, throttling), ``permanent=True`` with a reason staff can act on
(bucket owned by someone else, admin key refused, feature misconfigured). Nothing else escapes.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

LogFn = Callable[[str], None]


def _no_log(line: str) -> None:
    pass


@dataclass(frozen=True)
class ProviderConfig:
    """What an adapter knows about its provider: the catalog row plus settings (admin keys)."""

    slug: str
    kind: str
    endpoint_url: str = ""  # where the portal's workers reach the S3 API ("" = the SDK default)
    public_endpoint_url: str = ""  # what customers are shown ("" = endpoint_url)
    region: str = ""
    addressing_style: str = "path"
    access_key: str = field(default="", repr=False)
    secret_key: str = field(default="", repr=False)
    options: Mapping[str, Any] = field(default_factory=dict)  # adapter-specific, no secrets


@dataclass(frozen=True)
class LifecyclePolicy:
    keep_versions: int = 3  # newest noncurrent versions kept whatever their age
    noncurrent_days: int = 30  # older noncurrent versions expire after this many days
    abort_multipart_days: int = 7


@dataclass(frozen=True)
class BucketReport:
    """What ``ensure_bucket`` did: ``created`` is False for a bucket we already owned; ``skipped``
    names settings the provider does not offer (e.g. public-access block on B2)."""

    name: str
    created: bool
    skipped: tuple[str, ...] = ()


@dataclass(frozen=True)
class IssuedCredential:
    """A key that reaches one bucket only. ``handle`` is what ``revoke_credential`` needs besides
    the key id (IAM user name, B2 key id, …); it is not a secret."""

    access_key_id: str
    secret_access_key: str = field(repr=False)
    bucket: str = ""
    handle: str = ""

    def __str__(self) -> str:  # never print the secret by accident
        return f"credential {self.access_key_id} for {self.bucket}"


@runtime_checkable
class BucketProvider(Protocol):
    """One storage provider's hands. Every method may raise DriverError."""

    config: ProviderConfig
    creates_buckets: bool  # False for "custom": the customer brings bucket and keys

    def __init__(self, config: ProviderConfig) -> None: ...

    def ensure_bucket(self, name: str, *, versioning: bool = True,
                      lifecycle: LifecyclePolicy | None = None, encryption: bool = True,
                      log: LogFn = _no_log) -> BucketReport:
        """Creates the bucket, or accepts one we already own; sets versioning, lifecycle, default
        encryption and blocks public access where the provider supports each. A bucket owned by
        someone else is a permanent error."""
        ...

    def issue_credential(self, bucket: str, *, read_only: bool = False,
                         log: LogFn = _no_log) -> IssuedCredential:
        """A new key allowed on ``bucket`` (and its objects) only; ``read_only``: list and get
        only (a terminated order's retained bucket). Anything half-created is removed before an
        error is raised."""
        ...

    def revoke_credential(self, credential: IssuedCredential, *, log: LogFn = _no_log) -> None:
        """Deletes the key (and what was created for it). A key already gone is fine."""
        ...

    def delete_bucket(self, name: str, *, force: bool = False, log: LogFn = _no_log) -> bool:
        """Deletes the bucket; refuses (permanent error) a non-empty one unless ``force``.
        Returns False when there was no such bucket."""
        ...

    def s3_client(self, credential: IssuedCredential | None = None):
        """A boto3 S3 client on this provider's endpoint, with ``credential`` or the admin key."""
        ...

    def canary_bucket(self) -> str | None:
        """A bucket of ours that no customer key may reach (to prove a key's scope), or None
        where the provider cannot have one (custom)."""
        ...
