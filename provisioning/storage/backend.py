"""The pipeline's storage backend (``settings.PROVISIONING_STORAGE_BACKEND``): the storage steps
of provisioning, termination and day 2, on top of :mod:`provisioning.storage.services`.

Errors: a provider's DriverError goes up as it is (transient: the engine retries with backoff;
permanent: the step fails with its reason). Nothing here writes a secret to the step log or a
result; the key reaches the node only in the driver's environment.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from provisioning.drivers import DriverError
from provisioning.models import StepRun
from provisioning.pipeline.context import StepContext, StepFailed, StepResult
from provisioning.pipeline.node_tools import ensure_node_tools
from provisioning.stack.paths import CHECKPOINT_DIR
from provisioning.states import STEP_DONE
from provisioning.storage import node as node_scripts
from provisioning.storage.errors import translated
from provisioning.storage.models import Bucket
from provisioning.storage.registry import provider_for
from provisioning.storage.services import (
    StorageResult,
    active_credential,
    bucket_retain,
    credential_rotate,
    order_custom_access,
    retention_until,
    storage_revoke,
    storage_setup,
)
from provisioning.storage.states import BucketState


@dataclass(frozen=True)
class RetainResult(StepResult):
    """What termination kept: the checkpoints copied from this node, and the bucket's date."""

    policy: str = "wipe"  # "bucket": copied to the order's bucket; "wipe": nothing to keep
    bucket: str = ""
    prefix: str = ""
    files: int = 0
    bytes_copied: int = 0
    retain_until: str = ""  # ISO date-time
    note: str = ""


def checkpoint_prefix(node) -> str:
    return f"checkpoints/{node.hostname}"


class ServiceStorageBackend:
    """Buckets and keys through the provider adapters (MinIO, AWS, Wasabi, B2, custom)."""

    def provision(self, ctx: StepContext) -> StorageResult:
        order = ctx.order
        result = storage_setup(order=order, log=ctx.log, custom=order_custom_access(order))
        ctx.log(f"bucket {result.bucket} on {order.storage_provider} ready at {result.endpoint}; "
                f"key {result.access_key_id} verified")
        self._write_credentials(ctx, result)
        ctx.say(f"Bucket {result.bucket} ready at {result.endpoint}")
        return result

    def rotate(self, ctx: StepContext) -> StorageResult:
        """Day 2: a new verified key, written to this node; the old key revoked after."""
        order = ctx.order
        if order_custom_access(order) is not None:
            raise StepFailed("this order uses the customer's own bucket and keys: rotate them "
                             "with your provider")
        result = credential_rotate(order=order, log=ctx.log, since=ctx.run.created_at)
        self._write_credentials(ctx, result)
        ctx.say(f"New access key for bucket {result.bucket} issued; the old one is revoked")
        return result

    def revoke(self, ctx: StepContext) -> dict:
        """Termination: revokes the bucket's keys once every node has copied its checkpoints
        (the last node through ``retain_data`` revokes; the others leave it to that one)."""
        if not Bucket.objects.filter(order=ctx.order).exists():
            ctx.say("No bucket keys to revoke")
            return {"revoked": 0}
        waiting = (StepRun.objects.filter(run=ctx.run, step="retain_data")
                   .exclude(node=ctx.node).exclude(status__in=STEP_DONE).count())
        if waiting:
            ctx.say(f"Bucket keys stay until {waiting} more server(s) have copied their "
                    f"checkpoints")
            return {"revoked": 0, "deferred": True}
        count = storage_revoke(order=ctx.order, log=ctx.log, custom=order_custom_access(ctx.order))
        ctx.say(f"Bucket access keys revoked ({count})" if count else "Bucket keys already revoked")
        return {"revoked": count}

    def retain(self, ctx: StepContext) -> RetainResult:
        order = ctx.order
        bucket = Bucket.objects.filter(order=order).first()
        if bucket is None or bucket.state == BucketState.DELETED:
            ctx.say("No bucket was created for this order: data on the disks is erased with them")
            return RetainResult(policy="wipe", note="no bucket")
        result = self._copy(ctx, bucket)
        kept = bucket_retain(order=order, until=retention_until(order), extend=False)
        until = kept.retain_until
        copied = f" ({result.files} checkpoint file(s) copied from this server)" if result.files else ""
        ctx.say(f"Bucket {bucket.name} is kept until {until:%Y-%m-%d} "
                f"({order.storage_retention_days} days), then deleted{copied}")
        return RetainResult(**{**result.__dict__, "retain_until": until.isoformat()})

    # --- on the node -------------------------------------------------------------------------
    def _copy(self, ctx: StepContext, bucket: Bucket) -> RetainResult:
        node, prefix = ctx.node, checkpoint_prefix(ctx.node)
        directory = CHECKPOINT_DIR
        base = RetainResult(policy="bucket", bucket=bucket.name, prefix=prefix)
        if ctx.driver.simulated:
            ctx.log(f"{node.hostname} is simulated: it has no {directory} to copy")
            return RetainResult(**{**base.__dict__, "note": "simulated node: nothing to copy"})
        issued = active_credential(ctx.order)
        if issued is None:
            raise StepFailed(f"bucket {bucket.name} has no active key, so the checkpoints of "
                             f"{node.hostname} cannot be copied; nothing was wiped. Issue a key "
                             f"(retry the rotation) and retry this step.")
        env = {**ctx.env, **node_scripts.storage_env(
            endpoint=bucket.endpoint, bucket=bucket.name, region=bucket.region,
            access_key_id=issued.access_key_id, secret=issued.secret_access_key)}
        lines: list[str] = []

        def capture(line: str) -> None:
            lines.append(line)
            ctx.log(line)

        ensure_node_tools(ctx)
        run = ctx.driver.run(node_scripts.retain_script(prefix=prefix), name="retain_data",
                             on_line=capture, env=env)
        ctx.result["exit_status"] = run.exit_status
        nothing = next((line for line in lines if line.startswith(node_scripts.NOTHING_TO_COPY)), "")
        if nothing and run.ok:
            why = nothing.split(": ", 1)[-1]
            ctx.log(f"no checkpoints copied from {node.hostname}: {why}")
            return RetainResult(**{**base.__dict__, "note": why})
        summary = _summary(lines)
        if run.asks_retry:
            errors = "; ".join(summary.get("errors", [])[:3]) or _last(run)
            raise DriverError(f"copying the checkpoints of {node.hostname} to {bucket.name} "
                              f"failed: {errors}", permanent=False)
        if not run.ok or not summary.get("ok"):
            raise StepFailed(f"copying the checkpoints of {node.hostname} to {bucket.name} failed "
                             f"(exit status {run.exit_status}): {_last(run)}; nothing was wiped")
        self._verify_listed(ctx, bucket, prefix, int(summary.get("files", 0)))
        ctx.log(f"{summary.get('files', 0)} file(s) in s3://{bucket.name}/{prefix}/ verified")
        return RetainResult(**{**base.__dict__, "files": int(summary.get("files", 0)),
                               "bytes_copied": int(summary.get("bytes_uploaded", 0))})

    def _verify_listed(self, ctx: StepContext, bucket: Bucket, prefix: str, files: int) -> None:
        """From our side too: the bucket lists at least as many objects as the node copied."""
        adapter = provider_for(bucket.provider, custom=order_custom_access(ctx.order))
        with translated(f"list s3://{bucket.name}/{prefix}/"):
            pages = adapter.s3_client().get_paginator("list_objects_v2").paginate(
                Bucket=bucket.name, Prefix=prefix + "/")
            listed = sum(len(page.get("Contents", [])) for page in pages)
        if listed < files:
            raise DriverError(f"s3://{bucket.name}/{prefix}/ lists {listed} object(s), the node "
                              f"copied {files}", permanent=False)

    def _write_credentials(self, ctx: StepContext, result: StorageResult) -> None:
        issued = active_credential(ctx.order)
        if issued is None or ctx.driver.simulated:
            if issued is not None:
                ctx.log(f"{ctx.node.hostname} is simulated: no credentials file to write")
            return
        env = {**ctx.env, **node_scripts.storage_env(
            endpoint=result.endpoint, bucket=result.bucket, region=result.region,
            access_key_id=issued.access_key_id, secret=issued.secret_access_key)}
        run = ctx.driver.run(node_scripts.credentials_script(), name="storage_credentials",
                             on_line=ctx.log, env=env)
        if run.asks_retry:
            raise DriverError("writing the bucket credentials file asked to be retried",
                              permanent=False)
        if not run.ok:
            raise StepFailed(f"writing the bucket credentials file on {ctx.node.hostname} "
                             f"failed (exit status {run.exit_status}): {_last(run)}")


def _summary(lines: list[str]) -> dict:
    for line in reversed(lines):
        if line.startswith("{"):
            try:
                data = json.loads(line)
            except ValueError:
                continue
            if isinstance(data, dict) and "ok" in data:
                return data
    return {}


def _last(run) -> str:
    return run.output_tail[-1] if run.output_tail else "no output"
