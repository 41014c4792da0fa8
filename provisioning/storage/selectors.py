"""Reads for pages and the API: what a customer may see of an order's storage (never a secret)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from django.utils import timezone

from provisioning.models import StepRun
from provisioning.states import RunKind, StepStatus
from provisioning.storage.models import Bucket
from provisioning.storage.states import BucketState


@dataclass(frozen=True)
class StorageView:
    bucket: str
    endpoint: str
    region: str
    provider: str  # display name
    state: str
    retain_until: datetime | None
    access_key_id: str  # "" when no active key
    secret_revealable: bool  # the active key's secret has not been shown yet


def storage_for(order) -> StorageView | None:
    bucket = (Bucket.objects.filter(order=order).select_related("provider")
              .prefetch_related("credentials").first())
    if bucket is None:
        return None
    active = next((c for c in bucket.credentials.all() if c.active and not c.read_only), None)
    return StorageView(bucket=bucket.name, endpoint=bucket.endpoint, region=bucket.region,
                       provider=bucket.provider.name, state=bucket.state,
                       retain_until=bucket.retain_until,
                       access_key_id=active.access_key_id if active else "",
                       secret_revealable=bool(active and active.revealed_at is None))


@dataclass(frozen=True)
class CopiedFromNode:
    """What termination copied from one node into the bucket (the retain step's result)."""

    hostname: str
    files: int
    bytes_copied: int
    verified: bool  # copied, listed from our side and checked (the step succeeded)
    note: str  # e.g. "/data/checkpoints absent or empty"


@dataclass(frozen=True)
class RetainedData:
    """A terminating or terminated order's bucket as its customer reads it: where it is, until
    when, what was copied into it, and the read-only key (never its secret)."""

    bucket: str
    endpoint: str
    region: str
    provider: str
    state: str  # active (termination running) | retained | deleted
    retain_until: datetime | None
    managed: bool
    copied: tuple[CopiedFromNode, ...]
    read_key_id: str  # "" when none was issued
    read_key_revealable: bool
    read_key_pending: bool  # asked for, being issued
    read_key_failed: bool  # the last request failed (staff see why)

    @property
    def readable(self) -> bool:
        """A read-only key can be asked for: the bucket is kept and is ours."""
        return self.state == BucketState.RETAINED and self.managed


# A read-only key not issued within this long is shown as failed: the customer may ask again
# (a lost task message, a provider outage past the task's retries).
READ_KEY_PATIENCE = timedelta(minutes=15)


def retained_data_for(order) -> RetainedData | None:
    """The bucket of an order whose termination has started; None before, or without one."""
    bucket = (Bucket.objects.filter(order=order).select_related("provider")
              .prefetch_related("credentials").first())
    if bucket is None:
        return None
    retains = (StepRun.objects.filter(run__order=order, run__kind=RunKind.TERMINATE,
                                      step="retain_data")
               .select_related("node").order_by("node__hostname", "-pk"))
    copied: dict[str, CopiedFromNode] = {}
    for sr in retains:
        result = sr.result or {}
        copied.setdefault(sr.node.hostname, CopiedFromNode(
            hostname=sr.node.hostname, files=int(result.get("files") or 0),
            bytes_copied=int(result.get("bytes_copied") or 0),
            verified=sr.status == StepStatus.SUCCEEDED, note=str(result.get("note") or "")))
    key = next((c for c in bucket.credentials.all() if c.active and c.read_only), None)
    return RetainedData(
        bucket=bucket.name, endpoint=bucket.endpoint, region=bucket.region,
        provider=bucket.provider.name, state=bucket.state, retain_until=bucket.retain_until,
        managed=bucket.managed, copied=tuple(copied.values()),
        read_key_id=key.access_key_id if key else "",
        read_key_revealable=bool(key and key.revealed_at is None),
        read_key_pending=(bucket.read_key_requested_at is not None
                          and bucket.read_key_requested_at > timezone.now() - READ_KEY_PATIENCE),
        read_key_failed=bool(bucket.read_key_error) or (
            bucket.read_key_requested_at is not None
            and bucket.read_key_requested_at <= timezone.now() - READ_KEY_PATIENCE))
