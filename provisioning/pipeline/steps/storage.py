"""Object storage: the order's bucket and scoped key, through the backend named by dotted path in
``settings.PROVISIONING_STORAGE_BACKEND`` (default: ``provisioning.storage.backend``). The step
returns the storage service's ``StorageResult`` (no secret). With storage ordered and no backend,
or a provider without adapter or admin credentials, it fails with a reason staff can act on."""

from __future__ import annotations

from typing import Protocol

from django.conf import settings
from django.utils.module_loading import import_string

from provisioning.pipeline.context import StepContext, StepFailed, StepResult
from provisioning.storage.services import StorageResult

__all__ = ["StorageBackend", "StorageResult", "rotate_storage_key", "storage", "storage_backend"]


class StorageBackend(Protocol):
    """Creates, rotates, keeps and revokes an order's bucket and keys. Built with no arguments."""

    def provision(self, ctx: StepContext) -> StorageResult: ...

    def rotate(self, ctx: StepContext) -> StorageResult: ...

    def retain(self, ctx: StepContext) -> StepResult: ...

    def revoke(self, ctx: StepContext) -> dict: ...


def storage_backend() -> StorageBackend | None:
    path = settings.PROVISIONING_STORAGE_BACKEND
    return import_string(path)() if path else None


def _required_backend(order) -> StorageBackend:
    backend = storage_backend()
    if backend is None:
        raise StepFailed(
            f"Object storage was ordered ({order.storage_tb} TB on {order.storage_provider}), but "
            f"PROVISIONING_STORAGE_BACKEND is empty: no bucket was created. Set it (default "
            f"provisioning.storage.backend.ServiceStorageBackend) and retry this step, or drop "
            f"the storage from the order.")
    return backend


def storage(ctx: StepContext) -> StorageResult:
    order = ctx.order
    if not order.has_object_storage:
        ctx.say("No object storage ordered: nothing to set up")
        return StorageResult()
    return _required_backend(order).provision(ctx)


def rotate_storage_key(ctx: StepContext) -> StorageResult:
    """Day 2: a new key for the order's bucket, written to the node; the old one revoked after."""
    order = ctx.order
    if not order.has_object_storage:
        raise StepFailed(f"order {order.reference} has no object storage to rotate a key for")
    return _required_backend(order).rotate(ctx)
