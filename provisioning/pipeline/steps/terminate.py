"""The steps of a termination run: revoke credentials, retain data, wipe disks, back in stock."""

from __future__ import annotations

from dataclasses import dataclass, field

from django.conf import settings

from provisioning.pipeline.context import StepContext, StepFailed, StepResult
from provisioning.pipeline.steps.storage import storage_backend
from provisioning.stack.scripts import revoke_script, wipe_script


@dataclass(frozen=True)
class RevokeResult(StepResult):
    ssh_keys_revoked: bool = False
    storage: dict = field(default_factory=dict)


@dataclass(frozen=True)
class RetainResult(StepResult):
    policy: str = ""
    archived: bool = False


@dataclass(frozen=True)
class WipeResult(StepResult):
    devices: tuple[str, ...] = ()


@dataclass(frozen=True)
class ReadyResult(StepResult):
    gpu_count: int = 0


def revoke_credentials(ctx: StepContext) -> RevokeResult:
    ctx.run_script(revoke_script(), name="revoke_credentials")
    backend = storage_backend()
    if backend is not None:
        storage = backend.revoke(ctx)
    else:
        storage = {"revoked": []}
        ctx.log("no object-storage keys to revoke: this version issues none")
    return RevokeResult(ssh_keys_revoked=True, storage=storage)


def retain_data(ctx: StepContext) -> RetainResult:
    policy = settings.PROVISIONING_DATA_RETENTION
    if policy != "wipe":
        raise StepFailed(f"data retention policy {policy!r} is not implemented; only 'wipe' is. "
                         f"Set PROVISIONING_DATA_RETENTION=wipe or archive the data by hand.")
    ctx.log("policy 'wipe': local NVMe data is not archived; object-storage buckets stay with "
            "the customer")
    return RetainResult(policy=policy, archived=False)


def wipe(ctx: StepContext) -> WipeResult:
    ctx.run_script(wipe_script(ctx.node.nvme_devices), name="wipe")
    return WipeResult(devices=tuple(ctx.node.nvme_devices))


def ready(ctx: StepContext) -> ReadyResult:
    health = ctx.driver.health()
    ctx.log(f"{health.gpu_count} GPU(s) visible; {ctx.node.hostname} goes back into stock")
    return ReadyResult(gpu_count=health.gpu_count)
