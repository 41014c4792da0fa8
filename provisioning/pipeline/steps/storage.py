"""Object storage: buckets and scoped keys, through the backend named by dotted path in
``settings.PROVISIONING_STORAGE_BACKEND`` (like ``NODE_DRIVERS``). With storage ordered and no
backend configured, the step fails loudly with a reason staff can act on."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from django.conf import settings
from django.utils.module_loading import import_string

from provisioning.pipeline.context import StepContext, StepFailed, StepResult


@dataclass(frozen=True)
class BucketAccess:
    name: str
    endpoint: str = ""


@dataclass(frozen=True)
class StorageResult(StepResult):
    ordered: bool = False
    buckets: tuple[BucketAccess, ...] = ()

    @classmethod
    def from_dict(cls, data: dict | None) -> StorageResult:
        """Reads this result and older rows (``bucket``/``endpoint_url`` keys, bare names)."""
        data = data if isinstance(data, dict) else {}
        buckets = []
        for item in data.get("buckets") or ():
            if isinstance(item, dict):
                name = item.get("name") or item.get("bucket") or ""
                endpoint = item.get("endpoint") or item.get("endpoint_url") or ""
            else:
                name, endpoint = str(item), ""
            if name:
                buckets.append(BucketAccess(name=name, endpoint=endpoint))
        return cls(ordered=bool(data.get("ordered", bool(buckets))), buckets=tuple(buckets))


class StorageBackend(Protocol):
    """Creates and revokes an order's buckets and keys. Built with no arguments."""

    def provision(self, ctx: StepContext) -> StorageResult: ...

    def revoke(self, ctx: StepContext) -> dict: ...


def storage_backend() -> StorageBackend | None:
    path = settings.PROVISIONING_STORAGE_BACKEND
    return import_string(path)() if path else None


def storage(ctx: StepContext) -> StorageResult:
    order = ctx.order
    if not order.storage_provider_id or not order.storage_tb:
        ctx.log("no object storage ordered; nothing to do")
        return StorageResult(ordered=False)
    backend = storage_backend()
    if backend is None:
        raise StepFailed(
            f"Object storage was ordered ({order.storage_tb} TB on {order.storage_provider}), but "
            f"this version has no bucket provider implementation: no bucket was created. "
            f"Retry this step once storage support is deployed (PROVISIONING_STORAGE_BACKEND), "
            f"or swap the order's storage off.")
    return backend.provision(ctx)
