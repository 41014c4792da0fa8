"""The steps of a termination run: keep the data (checkpoints copied to the order's bucket, the
bucket kept until its date), revoke credentials, wipe disks, back in stock."""

from __future__ import annotations

from dataclasses import dataclass, field

from provisioning.pipeline.context import StepContext, StepFailed, StepResult
from provisioning.pipeline.steps.access import login_user_for
from provisioning.pipeline.steps.storage import storage_backend, storage_ordered
from provisioning.stack.scripts import revoke_script, wipe_script
from provisioning.storage.backend import RetainResult


@dataclass(frozen=True)
class RevokeResult(StepResult):
    ssh_keys_revoked: bool = False
    storage: dict = field(default_factory=dict)


@dataclass(frozen=True)
class WipeResult(StepResult):
    devices: tuple[str, ...] = ()


@dataclass(frozen=True)
class ReadyResult(StepResult):
    gpu_count: int = 0


def retain_data(ctx: StepContext) -> RetainResult:
    if not storage_ordered(ctx.order):
        ctx.log("no bucket was ordered: local data is wiped with the disks")
        return RetainResult(policy="wipe", note="no bucket ordered")
    backend = storage_backend()
    if backend is None:
        raise StepFailed("a bucket was ordered but PROVISIONING_STORAGE_BACKEND is empty: the "
                         "checkpoints cannot be copied, so nothing is wiped. Set it and retry.")
    return backend.retain(ctx)


def revoke_credentials(ctx: StepContext) -> RevokeResult:
    ctx.run_script(revoke_script(login_user_for(ctx.node)), name="revoke_credentials")
    backend = storage_backend()
    storage = backend.revoke(ctx) if backend is not None else {"revoked": 0}
    return RevokeResult(ssh_keys_revoked=True, storage=storage)


def wipe(ctx: StepContext) -> WipeResult:
    ctx.run_script(wipe_script(ctx.node.nvme_devices), name="wipe")
    return WipeResult(devices=tuple(ctx.node.nvme_devices))


def ready(ctx: StepContext) -> ReadyResult:
    health = ctx.driver.health()
    ctx.log(f"{health.gpu_count} GPU(s) visible; {ctx.node.hostname} goes back into stock")
    return ReadyResult(gpu_count=health.gpu_count)
