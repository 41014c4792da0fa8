"""Storage for an order: create the bucket, issue and verify a scoped key, rotate and revoke
keys, keep a terminated order's bucket until its date and delete it afterwards.

These take plain objects (an Order row, a catalog StorageProvider) and a ``log`` callable for
step output; they never write a secret to ``log`` or into a result. Provider I/O raises
:class:`DriverError` (transient or permanent); callers decide about retries.

Idempotence: one Bucket row per order and one active Credential per bucket (unique
constraints); issuing a key happens under ``select_for_update`` of the bucket row, so repeated
and concurrent calls for one order end with one bucket and one key.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.db import IntegrityError, transaction
from django.utils import timezone

from portal.core.states import DomainError, transition
from provisioning.drivers.base import DriverError
from provisioning.fulfilment.metering import order_meter
from provisioning.storage.base import IssuedCredential, LifecyclePolicy, LogFn, _no_log
from provisioning.storage.models import Bucket, BucketEvent, Credential
from provisioning.storage.registry import CustomAccess, provider_for
from provisioning.storage.states import BUCKET_TRANSITIONS, BucketState
from provisioning.storage.verify import verify, verify_read_only
from provisioning.webhooks import bucket_event_publish

_BUCKET_NAME = re.compile(r"^[a-z0-9][a-z0-9-]{1,61}[a-z0-9]$")
AWS_ENDPOINT = "https://s3.{region}.amazonaws.com"


@dataclass(frozen=True)
class StorageResult:
    """What the storage step hands on (to later steps, the server page, the API). No secret.
    The one storage result: the pipeline's storage step returns it, selectors read it back."""

    VERSION = 1
    bucket: str = ""  # "" when the order has no object storage
    endpoint: str = ""
    region: str = ""
    access_key_id: str = ""
    provider: str = ""  # catalog slug
    skipped: tuple[str, ...] = ()  # bucket settings the provider does not offer

    @property
    def ordered(self) -> bool:
        return bool(self.bucket)

    def to_dict(self) -> dict:
        return {"version": self.VERSION, **asdict(self), "skipped": list(self.skipped)}

    @classmethod
    def from_dict(cls, data: dict | None) -> StorageResult:
        """Reads this result; rows written before it (``{"ordered", "buckets": [...]}``) read as
        their first bucket. A newer version raises ValueError."""
        data = data if isinstance(data, dict) else {}
        if "version" not in data:
            first = next(iter(data.get("buckets") or ()), None)
            if isinstance(first, dict):
                return cls(bucket=first.get("name") or first.get("bucket") or "",
                           endpoint=first.get("endpoint") or first.get("endpoint_url") or "")
            return cls(bucket=str(first)) if first else cls()
        if data.get("version") != cls.VERSION:
            raise ValueError(f"storage result version {data.get('version')!r} is not {cls.VERSION}")
        return cls(bucket=data["bucket"], endpoint=data["endpoint"], region=data["region"],
                   access_key_id=data["access_key_id"], provider=data.get("provider", ""),
                   skipped=tuple(data.get("skipped", ())))


# --- names and settings -------------------------------------------------------------------

def bucket_name_for(order) -> str:
    """``<prefix>-<order reference>``, e.g. trainyard-o-1a2b3c4d: valid for S3, B2 and MinIO
    (3–63 lowercase letters, digits, hyphens), unique because the reference is, predictable."""
    prefix = re.sub(r"[^a-z0-9-]+", "-", settings.STORAGE_BUCKET_PREFIX.lower()).strip("-")
    ident = re.sub(r"[^a-z0-9]+", "-", (getattr(order, "reference", "") or f"order-{order.pk}").lower())
    ident = ident.strip("-")
    name = f"{prefix[:63 - len(ident) - 1]}-{ident}".strip("-") if prefix else ident
    if not _BUCKET_NAME.match(name) or "--" in name or name.startswith("xn--"):
        raise ValueError(f"cannot form a valid bucket name from prefix {prefix!r} and {ident!r}: "
                         f"set STORAGE_BUCKET_PREFIX to lowercase letters, digits and hyphens")
    return name


def lifecycle_policy() -> LifecyclePolicy:
    return LifecyclePolicy(keep_versions=settings.STORAGE_KEEP_VERSIONS,
                           noncurrent_days=settings.STORAGE_NONCURRENT_DAYS)


def retention_until(order, *, now: datetime | None = None) -> datetime:
    """The order's own retention (``storage_retention_days`` when the order has it) or
    STORAGE_RETENTION_DAYS, from ``now``."""
    days = getattr(order, "storage_retention_days", None)
    days = settings.STORAGE_RETENTION_DAYS if days is None else days
    return (now or timezone.now()) + timedelta(days=days)


def _public_endpoint(adapter) -> str:
    c = adapter.config
    endpoint = c.public_endpoint_url or getattr(adapter, "endpoint_url", "") or c.endpoint_url
    if not endpoint and c.kind == "aws":
        endpoint = AWS_ENDPOINT.format(region=c.region or "us-east-1")
    return endpoint


def _issued(cred: Credential) -> IssuedCredential:
    return IssuedCredential(access_key_id=cred.access_key_id, secret_access_key=cred.secret,
                            bucket=cred.bucket.name, handle=cred.handle)


# --- set-up -------------------------------------------------------------------------------

def storage_setup(*, order, provider=None, log: LogFn = _no_log,
                  custom: CustomAccess | None = None) -> StorageResult:
    """Bucket + one verified scoped key for ``order``; safe to call again and concurrently."""
    provider = provider or order.storage_provider
    if provider is None:
        raise DriverError(f"order {order.reference} has no storage provider", permanent=True)
    adapter = provider_for(provider, custom=custom)
    name = custom.bucket if custom else bucket_name_for(order)
    bucket = _bucket_row(order=order, provider=provider, name=name, managed=adapter.creates_buckets,
                         region=adapter.config.region, endpoint=_public_endpoint(adapter))
    if bucket.state != BucketState.ACTIVE:
        raise DriverError(f"bucket {bucket.name} of order {order.reference} is {bucket.state}, "
                          f"not active", permanent=True)
    report = adapter.ensure_bucket(name, versioning=True, lifecycle=lifecycle_policy(),
                                   encryption=True, log=log)
    canary = adapter.canary_bucket()
    if canary:
        adapter.ensure_bucket(canary, versioning=False, lifecycle=None, encryption=True,
                              log=_no_log)
    if list(report.skipped) != bucket.settings_skipped:
        Bucket.objects.filter(pk=bucket.pk).update(settings_skipped=list(report.skipped))
    with transaction.atomic():
        locked = Bucket.objects.select_for_update().get(pk=bucket.pk)
        current = locked.credentials.filter(active=True, read_only=False).first()
        if current is None:
            current = _issue_verified(adapter, locked, canary=canary, log=log)
        else:
            log(f"bucket {name} already has verified key {current.access_key_id}")
    return StorageResult(bucket=name, endpoint=bucket.endpoint, region=bucket.region,
                         access_key_id=current.access_key_id, provider=provider.slug,
                         skipped=tuple(report.skipped))


def _bucket_row(*, order, provider, name: str, managed: bool, region: str, endpoint: str) -> Bucket:
    defaults = {"provider": provider, "name": name, "managed": managed, "region": region,
                "endpoint": endpoint}
    try:
        with transaction.atomic():
            bucket, _ = Bucket.objects.get_or_create(order=order, defaults=defaults)
    except IntegrityError:  # the name is another order's: a prefix clash or a reused reference
        raise DriverError(f"bucket name {name} is already used by another order", permanent=True) from None
    if bucket.name != name or bucket.provider_id != provider.pk:
        raise DriverError(f"order {order.reference} already has bucket {bucket.name} on "
                          f"{bucket.provider}; it cannot switch to {name} on {provider}", permanent=True)
    return bucket


def _issue_verified(adapter, bucket: Bucket, *, canary: str | None, log: LogFn) -> Credential:
    """Issue a key, prove it (own bucket works, another is refused), then record it. A key that
    fails verification, or cannot be recorded, is revoked before the error goes up."""
    issued = adapter.issue_credential(bucket.name, log=log)
    try:
        verify(adapter.s3_client(issued), bucket.name, other_bucket=canary,
               propagation_s=settings.STORAGE_CREDENTIAL_PROPAGATION_S, log=log)
        with transaction.atomic():
            return Credential.objects.create(bucket=bucket, access_key_id=issued.access_key_id,
                                             secret=issued.secret_access_key, handle=issued.handle,
                                             active=True, verified_at=timezone.now())
    except BaseException:
        _revoke_quietly(adapter, issued, log)
        raise


def _revoke_quietly(adapter, issued: IssuedCredential, log: LogFn) -> None:
    try:
        adapter.revoke_credential(issued, log=log)
    except DriverError as exc:
        log(f"could not remove unverified key {issued.access_key_id} yet: {exc.message}")


def order_custom_access(order) -> CustomAccess | None:
    """The customer's own endpoint, bucket and keys (provider kind "custom"), else None."""
    provider = order.storage_provider
    if provider is None or provider.kind != "custom":
        return None
    return CustomAccess(endpoint_url=order.storage_endpoint_url, bucket=order.storage_bucket,
                        access_key_id=order.storage_access_key_id,
                        secret_access_key=order.storage_secret_key, region=provider.region)


def active_credential(order) -> IssuedCredential | None:
    """The order's active key with its secret, for writing it onto the order's own nodes
    (never into a log, a result or a page)."""
    cred = (Credential.objects.select_related("bucket")
            .filter(bucket__order=order, active=True, read_only=False).first())
    return _issued(cred) if cred is not None else None


def storage_result_for(order) -> StorageResult | None:
    """The storage result of the order's bucket as it is now (active key), or None."""
    bucket = Bucket.objects.filter(order=order).select_related("provider").first()
    if bucket is None:
        return None
    active = bucket.credentials.filter(active=True, read_only=False).first()
    return StorageResult(bucket=bucket.name, endpoint=bucket.endpoint, region=bucket.region,
                         access_key_id=active.access_key_id if active else "",
                         provider=bucket.provider.slug, skipped=tuple(bucket.settings_skipped))


# --- rotation and revocation ----------------------------------------------------------------

def credential_rotate(*, order, log: LogFn = _no_log, since: datetime | None = None,
                      custom: CustomAccess | None = None) -> StorageResult:
    """A new verified key replaces the active one; the old key is revoked only after the new one
    works. ``since`` (e.g. the day-2 run's start): if the active key is newer, the rotation
    already happened and only leftover revocations are finished (safe to redeliver)."""
    bucket = _active_bucket(order)
    adapter = provider_for(bucket.provider, custom=custom)
    canary = adapter.canary_bucket()
    with transaction.atomic():
        locked = Bucket.objects.select_for_update().get(pk=bucket.pk)
        old = locked.credentials.filter(active=True, read_only=False).first()
        if old is None or since is None or old.created_at < since:
            issued = adapter.issue_credential(locked.name, log=log)
            try:
                verify(adapter.s3_client(issued), locked.name, other_bucket=canary,
                       propagation_s=settings.STORAGE_CREDENTIAL_PROPAGATION_S, log=log)
                if old is not None:
                    Credential.objects.filter(pk=old.pk).update(active=False)
                new = Credential.objects.create(
                    bucket=locked, access_key_id=issued.access_key_id, secret=issued.secret_access_key,
                    handle=issued.handle, active=True, verified_at=timezone.now())
            except BaseException:
                _revoke_quietly(adapter, issued, log)
                raise
            log(f"new key {new.access_key_id} verified on {locked.name}")
        else:
            new = old
    _revoke_inactive(adapter, bucket, log)
    return StorageResult(bucket=bucket.name, endpoint=bucket.endpoint, region=bucket.region,
                         access_key_id=new.access_key_id, provider=bucket.provider.slug,
                         skipped=tuple(bucket.settings_skipped))


def storage_revoke(*, order, log: LogFn = _no_log, custom: CustomAccess | None = None) -> int:
    """Revokes every key of the order's bucket (termination). Idempotent; returns how many keys
    were revoked by this call. A provider error leaves the rest for the retry."""
    bucket = Bucket.objects.filter(order=order).select_related("provider").first()
    if bucket is None:
        return 0
    Credential.objects.filter(bucket=bucket, active=True).update(active=False)
    if not bucket.managed:
        return _forget_customer_keys(bucket, log)
    return _revoke_inactive(provider_for(bucket.provider, custom=custom), bucket, log)


def _revoke_inactive(adapter, bucket: Bucket, log: LogFn) -> int:
    count = 0
    for cred in Credential.objects.filter(bucket=bucket, active=False, revoked_at__isnull=True):
        adapter.revoke_credential(_issued(cred), log=log)
        Credential.objects.filter(pk=cred.pk).update(revoked_at=timezone.now(), secret="")
        log(f"key {cred.access_key_id} revoked")
        count += 1
    return count


def _forget_customer_keys(bucket: Bucket, log: LogFn) -> int:
    count = Credential.objects.filter(bucket=bucket, revoked_at__isnull=True).update(
        revoked_at=timezone.now(), secret="")
    if count:
        log(f"the customer's keys for {bucket.name} are no longer kept by us")
    return count


def credential_reveal(*, order, read_only: bool = False) -> tuple[str, str] | None:
    """(access key id, secret) the first time it is asked for; None afterwards ("rotate", or a
    new read-only key). ``read_only``: the retained bucket's read-only key."""
    with transaction.atomic():
        cred = (Credential.objects.select_for_update()
                .filter(bucket__order=order, active=True, read_only=read_only,
                        revealed_at__isnull=True).first())
        if cred is None:
            return None
        Credential.objects.filter(pk=cred.pk).update(revealed_at=timezone.now())
        return cred.access_key_id, cred.secret


def credentials_file_snippet(*, result: StorageResult, secret: str, profile: str = "trainyard") -> str:
    """A ready ``~/.aws/credentials`` block plus the AWS_ENDPOINT_URL line (to show once)."""
    return (f"[{profile}]\naws_access_key_id = {result.access_key_id}\n"
            f"aws_secret_access_key = {secret}\n"
            + (f"region = {result.region}\n" if result.region else "")
            + f"\n# shell\nexport AWS_PROFILE={profile} AWS_ENDPOINT_URL={result.endpoint}\n")


# --- retention ------------------------------------------------------------------------------

def bucket_transition(*, bucket: Bucket, name: str, by=None, note: str = "", **fields) -> Bucket:
    """One audited move of the bucket table (portal.core.states.transition)."""
    def record(locked, from_state, to_state, actor):
        return BucketEvent.objects.create(bucket=locked, actor=actor, transition=name,
                                          from_state=from_state, to_state=to_state, note=note)

    with transaction.atomic():
        bucket, _ = transition(bucket, table=BUCKET_TRANSITIONS, name=name, record=record, by=by,
                               subject=f"bucket {bucket.name}",
                               fields={"state_changed_at": timezone.now(), **fields})
        bucket_event_publish(bucket=bucket, transition=name)  # storage.retained / .deleted
        if name == "delete":
            order_meter(order=bucket.order_id, cause="bucket deleted")
    return bucket


def bucket_retain(*, order, until: datetime | None = None, by=None, note: str = "",
                  extend: bool = True) -> Bucket | None:
    """Keeps the order's bucket until ``until`` (default: the order's retention from now).
    ``extend=False``: a bucket already retained keeps its date (each node of a cluster calls
    this at termination; the first one sets the date)."""
    bucket = Bucket.objects.filter(order=order).first()
    if bucket is None or bucket.state == BucketState.DELETED:
        return bucket
    if bucket.state == BucketState.RETAINED and not extend:
        return bucket
    until = until or retention_until(order)
    return bucket_transition(bucket=bucket, name="retain", by=by, retain_until=until,
                             note=note or f"kept until {until:%Y-%m-%d}")


@dataclass(frozen=True)
class DeletionReport:
    deleted: tuple[str, ...]
    failed: tuple[str, ...]  # "name: reason", retried by the next beat


def buckets_delete_expired(*, now: datetime | None = None, log: LogFn = _no_log) -> DeletionReport:
    """Deletes retained buckets whose date has passed (beat task). A bucket before its date is
    never touched; after it, its contents go with it. Custom buckets are only marked deleted."""
    now = now or timezone.now()
    deleted, failed = [], []
    due = Bucket.objects.filter(state=BucketState.RETAINED, retain_until__lte=now)
    for bucket in due.select_related("provider"):
        with transaction.atomic():
            locked = (Bucket.objects.select_for_update(skip_locked=True)
                      .filter(pk=bucket.pk, state=BucketState.RETAINED, retain_until__lte=now).first())
            if locked is None:
                continue  # another worker has it, or its date moved
            try:
                if locked.managed:
                    adapter = provider_for(bucket.provider)
                    Credential.objects.filter(bucket=locked, active=True).update(active=False)
                    _revoke_inactive(adapter, locked, log)  # the read-only key too
                    adapter.delete_bucket(locked.name, force=True, log=log)
            except DriverError as exc:
                failed.append(f"{locked.name}: {exc.message}")
                log(f"bucket {locked.name} not deleted yet: {exc.message}")
                continue
            bucket_transition(bucket=locked, name="delete",
                              note=f"retention ended {locked.retain_until:%Y-%m-%d}")
        deleted.append(locked.name)
    return DeletionReport(deleted=tuple(deleted), failed=tuple(failed))


# --- a read-only key during retention -------------------------------------------------------

def retention_key_mark_requested(*, order) -> Bucket:
    """The customer asks for a key to read the terminated order's retained bucket (list and get
    only); a worker issues it (``retention_key_issue``); the page then shows its id and the
    secret once. Asking again replaces the key. (Queued by ``provisioning.fulfilment.day2``.)"""
    with transaction.atomic():
        bucket = Bucket.objects.select_for_update().filter(order=order).first()
        if bucket is None or bucket.state != BucketState.RETAINED:
            raise DomainError("A read-only key is for a bucket kept after termination; this order "
                              "has none.")
        if not bucket.managed:
            raise DomainError(f"Bucket {bucket.name} is your own: read it with your own keys.")
        Bucket.objects.filter(pk=bucket.pk).update(read_key_requested_at=timezone.now(),
                                                   read_key_error="")
    bucket.refresh_from_db()
    return bucket


def retention_key_issue(*, order_id: int, log: LogFn = _no_log) -> Credential | None:
    """Issues and verifies the read-only key asked for (a worker's task; safe to deliver twice:
    a request already served is not served again). The previous read-only key is revoked after
    the new one works. A provider error stays on the bucket for staff; the customer may ask again."""
    bucket = (Bucket.objects.select_related("provider")
              .filter(order_id=order_id, read_key_requested_at__isnull=False).first())
    if bucket is None:
        return None
    if bucket.state != BucketState.RETAINED or not bucket.managed:
        Bucket.objects.filter(pk=bucket.pk).update(read_key_requested_at=None)
        return None
    adapter = provider_for(bucket.provider)
    asked = bucket.read_key_requested_at
    try:
        issued = adapter.issue_credential(bucket.name, read_only=True, log=log)
        try:
            verify_read_only(adapter.s3_client(issued), bucket.name,
                             other_bucket=adapter.canary_bucket(),
                             propagation_s=settings.STORAGE_CREDENTIAL_PROPAGATION_S, log=log)
            with transaction.atomic():
                locked = Bucket.objects.select_for_update().get(pk=bucket.pk)
                if locked.state != BucketState.RETAINED or locked.read_key_requested_at != asked:
                    # Deleted meanwhile, or another delivery served this request: this key is
                    # nobody's. It is revoked below, and the request is left as it is now.
                    raise _NotNeeded()
                Credential.objects.filter(bucket=locked, active=True, read_only=True).update(
                    active=False)
                cred = Credential.objects.create(
                    bucket=locked, access_key_id=issued.access_key_id,
                    secret=issued.secret_access_key, handle=issued.handle, active=True,
                    read_only=True, verified_at=timezone.now())
                Bucket.objects.filter(pk=bucket.pk).update(read_key_requested_at=None)
        except _NotNeeded:
            _revoke_quietly(adapter, issued, log)
            return None
        except BaseException:
            _revoke_quietly(adapter, issued, log)
            raise
    except DriverError as exc:
        if not exc.permanent:
            raise  # the task retries
        Bucket.objects.filter(pk=bucket.pk).update(read_key_requested_at=None,
                                                   read_key_error=exc.message[:2000])
        return None
    _revoke_inactive(adapter, bucket, log)
    return cred


class _NotNeeded(Exception):
    """The read-only key just issued is not wanted any more (see retention_key_issue)."""


def _active_bucket(order) -> Bucket:
    bucket = Bucket.objects.filter(order=order).select_related("provider").first()
    if bucket is None or bucket.state != BucketState.ACTIVE:
        raise DriverError(f"order {order.reference} has no active bucket", permanent=True)
    return bucket
