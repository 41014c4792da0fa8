"""The provisioning pipeline: what each step does, and how a step is claimed, run and recorded.

A step is one ``StepRun`` row keyed by (run, node, step). A worker claims it with a conditional
UPDATE (only from pending / waiting-to-retry once its ``retry_at`` has come / running with a
lapsed lease), holds it under a lease it renews while it works, and records the outcome with
another conditional UPDATE on its own claim token. So a succeeded step is never executed
again, a redelivered task returns early (or waits for the retry time), and a step whose worker
died is taken over once the lease lapses.

State changes (node, order, run) happen in the same transaction as the step's outcome; driver
I/O happens outside any transaction.
"""

from __future__ import annotations

import importlib.util
import logging
import random
import shlex
import threading
import time
import uuid
from dataclasses import dataclass, field
from datetime import timedelta
from functools import cached_property

from celery.exceptions import SoftTimeLimitExceeded
from django.conf import settings
from django.db import connection, transaction
from django.db.models import F, Q
from django.db.models.functions import Coalesce
from django.utils import timezone
from django.utils.module_loading import import_string

from portal.orders.models import Order
from portal.orders.states import DomainError, OrderState
from portal.orders.transitions import order_transition
from provisioning.drivers import DriverError, driver_for
from provisioning.drivers.base import RunResult
from provisioning.models import Node, ProvisioningRun, StepLogLine, StepRun
from provisioning.services import node_transition
from provisioning.states import (
    STEP_DONE,
    NodeState,
    RunKind,
    RunStatus,
    StepSpec,
    StepStatus,
    step_spec,
)

logger = logging.getLogger(__name__)

StepKey = tuple[int, int, str]  # (run_id, node_id, step)

# Slots filled by later issues. Until the module exists, the step does its minimal version
# (stack: a built-in bootstrap script) or fails loudly (storage ordered but no provider).
STORAGE_STEP = "provisioning.storage.step.storage_step"  # (ctx) -> dict
STORAGE_REVOKE = "provisioning.storage.step.storage_revoke"  # (ctx) -> dict
STACK_RENDER = "provisioning.stack.render.render_bootstrap"  # (*, order, node, nodes) -> str


# What the step log (shown to the customer) says about a crash; the details go to staff.
INTERNAL_ERROR_LINE = "internal error; our staff has been told"


class StepFailed(Exception):
    """A step failed for a reason retrying cannot fix. The message is for staff."""

    def __init__(self, message: str, *, result: dict | None = None):
        super().__init__(message)
        self.message = message
        self.result = result or {}


@dataclass(frozen=True)
class StepOutcome:
    """What happened to one task delivery. ``next_steps`` are to be queued by the caller."""

    # succeeded | failed | retry | busy | waiting | already_done | blocked | stopped | lost | missing
    status: str
    next_steps: tuple[StepKey, ...] = ()
    retry_in_s: float | None = None
    message: str = ""


# --- the context a step function works with ---------------------------------------------------
@dataclass
class StepContext:
    run: ProvisioningRun
    order: Order
    node: Node
    step_run: StepRun
    log: _LogWriter
    result: dict = field(default_factory=dict)

    @cached_property
    def driver(self):
        return driver_for(self.node)

    @cached_property
    def cluster(self) -> list[Node]:
        swapped_out = StepRun.objects.filter(run=self.run, status=StepStatus.SKIPPED).values("node_id")
        ids = StepRun.objects.filter(run=self.run).exclude(node_id__in=swapped_out).values("node_id")
        return list(Node.objects.filter(pk__in=ids).order_by("hostname"))

    @property
    def env(self) -> dict[str, str]:
        nodes = self.cluster
        rank = next((i for i, n in enumerate(nodes) if n.pk == self.node.pk), 0)
        return {
            "TRAINYARD_ORDER": self.order.reference,
            "TRAINYARD_NODE": self.node.hostname,
            "TRAINYARD_NODE_RANK": str(rank),
            "TRAINYARD_NNODES": str(len(nodes)),
            "TRAINYARD_GPUS_PER_NODE": str(self.order.sku.gpu_count),
            "TRAINYARD_MASTER_ADDR": nodes[0].management_address.split(":")[0] if nodes else "",
        }

    def run_script(self, script: str, *, name: str) -> RunResult:
        self.log(f"$ running {name} script on {self.node.hostname}")
        result = self.driver.run(script, name=name, on_line=self.log, env=self.env)
        self.result["exit_status"] = result.exit_status
        if result.asks_retry:
            raise DriverError(f"{name} script on {self.node.hostname} asked to be retried later "
                              f"(exit {result.exit_status})", permanent=False)
        if not result.ok:
            last = result.output_tail[-1] if result.output_tail else "no output"
            raise StepFailed(f"{name} script exited with status {result.exit_status}: {last}",
                             result=self.result)
        return result


class _LogWriter:
    """Collects the driver's output lines and writes them in small batches (live for the page)."""

    def __init__(self, step_run_id: int, attempt: int):
        self.step_run_id, self.attempt = step_run_id, attempt
        self.buffer: list[StepLogLine] = []
        self.flushed_at = time.monotonic()

    def __call__(self, line: str) -> None:
        for part in (str(line).splitlines() or [""]):
            self.buffer.append(StepLogLine(step_run_id=self.step_run_id, at=timezone.now(),
                                           attempt=self.attempt, text=part[:4000]))
        if len(self.buffer) >= 50 or time.monotonic() - self.flushed_at > 0.5:
            self.flush()

    def flush(self) -> None:
        if self.buffer:
            StepLogLine.objects.bulk_create(self.buffer)
            self.buffer = []
        self.flushed_at = time.monotonic()


class _Lease(threading.Thread):
    """Renews the claim on a step while it runs; a dead worker stops renewing."""

    def __init__(self, step_run_id: int, token: str):
        super().__init__(daemon=True, name=f"lease-{step_run_id}")
        self.step_run_id, self.token = step_run_id, token
        self.lease_s = settings.PROVISIONING_STEP_LEASE_S
        self.done = threading.Event()

    def run(self) -> None:
        try:
            while not self.done.wait(self.lease_s / 3):
                renewed = StepRun.objects.filter(
                    pk=self.step_run_id, claimed_by=self.token, status=StepStatus.RUNNING,
                ).update(lease_expires_at=timezone.now() + timedelta(seconds=self.lease_s))
                if not renewed:
                    return
        except Exception:  # a renewal that fails only shortens the lease
            logger.exception("lease renewal failed", extra={"step_run": self.step_run_id})
        finally:
            connection.close()

    def stop(self) -> None:
        self.done.set()
        self.join(timeout=5)


# --- claiming and recording -------------------------------------------------------------------
def step_execute(*, run_id: int, node_id: int, step: str, token: str | None = None) -> StepOutcome:
    """Runs one step once. Safe to call for the same key any number of times, concurrently."""
    token = token or uuid.uuid4().hex
    sr = (StepRun.objects.select_related("run").filter(run_id=run_id, node_id=node_id, step=step)
          .first())
    if sr is None:
        return StepOutcome("missing")
    if sr.status in STEP_DONE:
        return StepOutcome("already_done")
    if sr.status == StepStatus.FAILED:
        return StepOutcome("failed", message=sr.error)
    if sr.run.status != RunStatus.RUNNING:
        return StepOutcome("stopped")
    if StepRun.objects.filter(run_id=run_id, node_id=node_id, position__lt=sr.position).exclude(
            status__in=STEP_DONE).exists():
        return StepOutcome("blocked")  # whoever finishes the step before queues this one
    now = timezone.now()
    if sr.status == StepStatus.RUNNING and sr.lease_expires_at and sr.lease_expires_at > now:
        # Held: by a live worker (a duplicate delivery), or by a dead one whose lease runs out.
        return StepOutcome("busy", retry_in_s=(sr.lease_expires_at - now).total_seconds() + 1)
    if sr.status == StepStatus.RETRYING and sr.retry_at and sr.retry_at > now:
        # A duplicate delivery of a step that waits out its backoff: not yet.
        return StepOutcome("waiting", retry_in_s=(sr.retry_at - now).total_seconds() + 1)
    lease = timedelta(seconds=settings.PROVISIONING_STEP_LEASE_S)
    claimed = StepRun.objects.filter(pk=sr.pk).filter(
        Q(status=StepStatus.PENDING)
        | Q(status=StepStatus.RETRYING, retry_at__isnull=True)
        | Q(status=StepStatus.RETRYING, retry_at__lte=now)
        | Q(status=StepStatus.RUNNING, lease_expires_at__lt=now)
    ).update(status=StepStatus.RUNNING, claimed_by=token, attempts=F("attempts") + 1,
             started_at=Coalesce(F("started_at"), now), lease_expires_at=now + lease,
             retry_at=None)
    if claimed != 1:
        return StepOutcome("busy", retry_in_s=lease.total_seconds() + 1)
    return _run_claimed(StepRun.objects.select_related("run").get(pk=sr.pk), token)


def _run_claimed(sr: StepRun, token: str) -> StepOutcome:
    run = sr.run
    spec = step_spec(run.kind, sr.step)
    node = Node.objects.select_related("sku__gpu").get(pk=sr.node_id)
    order = Order.objects.select_related("sku__gpu", "nvme", "network", "storage_provider",
                                         "strategy", "tracker").get(pk=run.order_id)
    log = _LogWriter(sr.pk, sr.attempts)
    if sr.attempts > 1:
        log(f"attempt {sr.attempts} of {spec.label.lower()}")
    ctx = StepContext(run=run, order=order, node=node, step_run=sr, log=log)
    try:
        with transaction.atomic():
            _on_start(ctx, spec)
    except DomainError as exc:
        log.flush()
        return _fail(sr, f"{spec.label} cannot start: {exc}", token=token, log=log)
    heartbeat = _Lease(sr.pk, token)
    heartbeat.start()
    try:
        result = STEP_FUNCTIONS[sr.step](ctx)
    except DriverError as exc:
        outcome = ("permanent", exc.message) if exc.permanent else ("transient", exc.message)
    except StepFailed as exc:
        ctx.result.update(exc.result)
        outcome = ("permanent", exc.message)
    except SoftTimeLimitExceeded:
        outcome = ("transient", f"{spec.label} hit the task time limit")
    except Exception as exc:
        logger.exception("step crashed", extra={"step": sr.step, "node": node.hostname})
        outcome = ("internal", f"internal error in {sr.step}: {type(exc).__name__}: {exc}")
    else:
        outcome = ("ok", result)
    finally:
        heartbeat.stop()
        log.flush()
    kind, value = outcome
    if kind == "ok":
        return _succeed(sr, spec, value or {}, token=token)
    if kind == "transient":
        return _transient(sr, value, token=token, log=log)
    # An internal error's details (exception, message) are for staff: the step error and the
    # run page have them; the log, which the customer's progress card shows, says less.
    return _fail(sr, value, token=token, log=log, result=ctx.result,
                 public_message=INTERNAL_ERROR_LINE if kind == "internal" else None)


def _on_start(ctx: StepContext, spec: StepSpec) -> None:
    node = Node.objects.select_for_update().get(pk=ctx.node.pk)
    if node.order_id != ctx.run.order_id:  # a stale run must not touch another order's node
        raise DomainError(f"{node.hostname} no longer serves order {ctx.order.reference} (it is "
                          f"{node.get_state_display().lower()}); nothing was done.")
    if spec.enter:
        from provisioning.states import NODE_TRANSITIONS

        if node.state != NODE_TRANSITIONS.get(spec.enter).target:
            node_transition(node=node, name=spec.enter, event_order=ctx.order,
                            note=f"{spec.label}, run #{ctx.run.pk}")
    if ctx.run.kind == RunKind.PROVISION and spec.name in ("acceptance", "handover"):
        order = Order.objects.select_for_update().get(pk=ctx.order.pk)
        unfinished = (StepRun.objects.filter(run=ctx.run, step="stack")
                      .exclude(status__in=STEP_DONE).exists())
        if order.state == OrderState.PROVISIONING and not unfinished:
            order_transition(order=order, name="verify", note="all nodes installed; acceptance test")


def _succeed(sr: StepRun, spec: StepSpec, result: dict, *, token: str) -> StepOutcome:
    with transaction.atomic():
        run = ProvisioningRun.objects.select_for_update().get(pk=sr.run_id)
        done = StepRun.objects.filter(pk=sr.pk, status=StepStatus.RUNNING, claimed_by=token).update(
            status=StepStatus.SUCCEEDED, finished_at=timezone.now(), result=result,
            lease_expires_at=None, error="")
        if done != 1:
            return StepOutcome("lost", message="another worker took the step over")
        if run.status == RunStatus.CANCELLED:
            # Cancelled while this step ran (e.g. the order was cancelled or is terminating):
            # the node and the order belong to whatever came next; leave them alone.
            return StepOutcome("stopped", message="the run was cancelled meanwhile")
        node = Node.objects.get(pk=sr.node_id)
        if spec.on_success and (run.status == RunStatus.RUNNING or _still_ours(node, run, spec.on_success)):
            node_transition(node=node, name=spec.on_success, event_order=run.order,
                            note=f"{spec.label}, run #{run.pk}",
                            **({"order_id": None} if spec.on_success == "return_to_stock" else {}))
        if run.status == RunStatus.RUNNING and not run.steps.exclude(status__in=STEP_DONE).exists():
            _run_complete(run)
    if run.status != RunStatus.RUNNING:
        return StepOutcome("succeeded")
    following = (StepRun.objects.filter(run_id=sr.run_id, node_id=sr.node_id,
                                        position=sr.position + 1).values_list("step", flat=True).first())
    return StepOutcome("succeeded", next_steps=((sr.run_id, sr.node_id, following),) if following else ())


def _still_ours(node: Node, run: ProvisioningRun, transition: str) -> bool:
    """Whether a stopped run's late step may still move ``node`` (e.g. a cluster node finishing
    after another node failed the run): only while the node serves the order and the move fits."""
    from provisioning.states import NODE_TRANSITIONS

    return node.order_id == run.order_id and NODE_TRANSITIONS.get(transition).allowed_from(node.state)


def _run_complete(run: ProvisioningRun) -> None:
    order = Order.objects.select_for_update().get(pk=run.order_id)
    if run.kind == RunKind.PROVISION:
        if order.state == OrderState.PROVISIONING:
            order_transition(order=order, name="verify", note="all nodes installed")
        order_transition(order=order, name="activate",
                         note=f"{order.node_count} node(s) passed acceptance and were handed over",
                         failure_reason="")
    elif run.kind == RunKind.TERMINATE:
        order_transition(order=order, name="finish_termination", note="all nodes wiped")
    run.status = RunStatus.SUCCEEDED
    run.finished_at = timezone.now()
    run.save(update_fields=["status", "finished_at"])


def _transient(sr: StepRun, message: str, *, token: str, log: _LogWriter) -> StepOutcome:
    attempts = StepRun.objects.values_list("attempts", flat=True).get(pk=sr.pk)
    if attempts >= settings.PROVISIONING_STEP_MAX_ATTEMPTS:
        return _fail(sr, f"gave up after {attempts} attempts: {message}", token=token, log=log)
    delay = backoff_s(attempts)
    waiting = StepRun.objects.filter(pk=sr.pk, status=StepStatus.RUNNING, claimed_by=token).update(
        status=StepStatus.RETRYING, retry_at=timezone.now() + timedelta(seconds=delay),
        error=f"attempt {attempts}: {message}", claimed_by="", lease_expires_at=None)
    if waiting != 1:
        return StepOutcome("lost", message="another worker took the step over")
    log(f"attempt {attempts} failed: {message}; retrying in {delay:.1f} s")
    log.flush()
    return StepOutcome("retry", retry_in_s=delay, message=message)


def backoff_s(attempt: int) -> float:
    """Exponential backoff with jitter: base·2^(attempt−1), capped, times a factor in [0.5, 1]."""
    base = settings.PROVISIONING_RETRY_BASE_MS / 1000
    cap = settings.PROVISIONING_RETRY_MAX_MS / 1000
    return min(cap, base * 2 ** max(0, attempt - 1)) * random.uniform(0.5, 1.0)


def _fail(sr: StepRun, message: str, *, token: str | None, log: _LogWriter | None = None,
          result: dict | None = None, claim: Q | None = None,
          public_message: str | None = None) -> StepOutcome:
    """Records a permanent failure. ``message`` is for staff (step error, run error, order
    failure reason); the step log, which the customer sees, gets ``public_message`` if given."""
    claim = claim if claim is not None else Q(status=StepStatus.RUNNING, claimed_by=token)
    with transaction.atomic():
        run = ProvisioningRun.objects.select_for_update().select_related("order").get(pk=sr.run_id)
        fields = {"status": StepStatus.FAILED, "finished_at": timezone.now(), "error": message,
                  "lease_expires_at": None, "retry_at": None}
        if result:
            fields["result"] = result
        if StepRun.objects.filter(claim, pk=sr.pk).update(**fields) != 1:
            return StepOutcome("lost", message="another worker took the step over")
        # Cancelled while this step ran: node and order are not this run's any more (see _succeed).
        cancelled = run.status == RunStatus.CANCELLED
        if not cancelled:
            _fail_run(run, sr, message)
    if log is not None:
        log(f"FAILED: {public_message or message}")
        log.flush()
    return StepOutcome("stopped" if cancelled else "failed", message=message)


def _fail_run(run: ProvisioningRun, sr: StepRun, message: str) -> None:
    """A step of ``run`` failed for good: node, run and order move to their failed states."""
    spec = step_spec(run.kind, sr.step)
    node = Node.objects.get(pk=sr.node_id)
    # A node that went to maintenance or now serves another order is not this run's to fail.
    if spec.on_failure and node.state != NodeState.MAINTENANCE and node.order_id == run.order_id:
        from provisioning.states import NODE_TRANSITIONS

        if NODE_TRANSITIONS.get(spec.on_failure).allowed_from(node.state):
            node_transition(node=node, name=spec.on_failure, event_order=run.order,
                            note=f"{spec.label}: {message}")
    summary = f"{spec.label} failed on {node.hostname}: {message}"
    if run.status == RunStatus.RUNNING:
        run.status = RunStatus.FAILED
        run.error = summary
        run.finished_at = timezone.now()
        run.save(update_fields=["status", "error", "finished_at"])
    order = Order.objects.select_for_update().get(pk=run.order_id)
    if run.kind == RunKind.PROVISION and order.state in (OrderState.PROVISIONING,
                                                         OrderState.VERIFYING):
        order_transition(order=order, name="fail", note=summary, failure_reason=summary)
    else:
        Order.objects.filter(pk=order.pk).update(failure_reason=summary)


def step_fail_stuck(*, step_run: StepRun, message: str) -> bool:
    """Fails a step that outlived its deadline, whoever holds it (the sweeper's move)."""
    outcome = _fail(step_run, message, token=None,
                    claim=Q(status__in=[StepStatus.RUNNING, StepStatus.RETRYING],
                            attempts=step_run.attempts))
    if outcome.status == "failed":
        StepLogLine.objects.create(step_run=step_run, at=timezone.now(),
                                   attempt=step_run.attempts, text=f"FAILED: {message}")
        return True
    return False


# --- the steps --------------------------------------------------------------------------------
def _reserve(ctx: StepContext) -> dict:
    node = Node.objects.get(pk=ctx.node.pk)
    if node.order_id != ctx.order.pk or node.state != NodeState.RESERVED:
        raise StepFailed(f"{node.hostname} is no longer reserved for order {ctx.order.reference} "
                         f"(it is {node.get_state_display().lower()}); swap the node.")
    ctx.log(f"{node.hostname} is reserved for {ctx.order.reference}")
    return {"node": node.hostname, "fabric_group": node.fabric_group}


def _deploy_os(ctx: StepContext) -> dict:
    image = settings.PROVISIONING_OS_IMAGE
    ctx.log(f"powering on {ctx.node.hostname}")
    ctx.driver.power("on")
    ctx.driver.deploy_os(image=image, on_line=ctx.log)
    return {"image": image}


def _configure(ctx: StepContext) -> dict:
    ctx.run_script(configure_script(ctx.order, ctx.node), name="configure")
    return {"nvme": str(ctx.order.nvme), "network": str(ctx.order.network),
            "exit_status": ctx.result.get("exit_status", 0)}


def _storage(ctx: StepContext) -> dict:
    order = ctx.order
    if not order.storage_provider_id or not order.storage_tb:
        ctx.log("no object storage ordered; nothing to do")
        return {"buckets": [], "ordered": False}
    if importlib.util.find_spec("provisioning.storage") is None or \
            importlib.util.find_spec("provisioning.storage.step") is None:
        raise StepFailed(
            f"Object storage was ordered ({order.storage_tb} TB on {order.storage_provider}), but "
            f"this version has no bucket provider implementation: no bucket was created. "
            f"Retry this step once storage support is deployed, or swap the order's storage off.")
    return import_string(STORAGE_STEP)(ctx)


def _stack(ctx: StepContext) -> dict:
    if importlib.util.find_spec("provisioning.stack") is not None and \
            importlib.util.find_spec("provisioning.stack.render") is not None:
        script = import_string(STACK_RENDER)(order=ctx.order, node=ctx.node, nodes=ctx.cluster)
        source = STACK_RENDER
    else:
        script = bootstrap_script(ctx.order)
        source = "built-in minimal bootstrap"
    ctx.run_script(script, name="stack")
    return {"strategy": ctx.order.strategy.slug if ctx.order.strategy else "",
            "tracker": ctx.order.tracker.slug if ctx.order.tracker else "", "renderer": source}


def _acceptance(ctx: StepContext) -> dict:
    expected = ctx.order.sku.gpu_count
    script_result = ctx.driver.run(acceptance_script(expected), name="acceptance", on_line=ctx.log,
                                   env=ctx.env)
    health = ctx.driver.health()
    checks = [
        {"name": "acceptance script", "ok": script_result.ok,
         "detail": f"exit status {script_result.exit_status}"},
        {"name": "GPUs visible", "ok": health.gpu_count == expected,
         "detail": f"{health.gpu_count} of {expected}"},
        {"name": "no uncorrected ECC errors", "ok": health.ecc_errors == 0,
         "detail": f"{health.ecc_errors} error(s)"},
        {"name": "GPU temperature below 85 °C",
         "ok": health.max_temperature_c is None or health.max_temperature_c < 85,
         "detail": "n/a" if health.max_temperature_c is None else f"{health.max_temperature_c:.0f} °C"},
    ]
    report = {"passed": all(c["ok"] for c in checks), "checks": checks,
              "gpu_count": health.gpu_count, "expected_gpu_count": expected,
              "max_temperature_c": health.max_temperature_c, "ecc_errors": health.ecc_errors,
              "output_tail": list(script_result.output_tail)}
    for check in checks:
        ctx.log(f"{'PASS' if check['ok'] else 'FAIL'} {check['name']}: {check['detail']}")
    if not report["passed"]:
        failed = "; ".join(f"{c['name']} ({c['detail']})" for c in checks if not c["ok"])
        raise StepFailed(f"acceptance test failed: {failed}", result={"report": report})
    return {"report": report}


def _handover(ctx: StepContext) -> dict:
    ctx.log(f"{ctx.node.hostname} handed over to {ctx.order.organisation}")
    return {"hostname": ctx.node.hostname, "address": ctx.node.management_address,
            "handed_over_at": timezone.now().isoformat()}


def _revoke_credentials(ctx: StepContext) -> dict:
    ctx.run_script(revoke_script(), name="revoke_credentials")
    storage = {"revoked": []}
    if importlib.util.find_spec("provisioning.storage") is not None and \
            importlib.util.find_spec("provisioning.storage.step") is not None:
        storage = import_string(STORAGE_REVOKE)(ctx)
    else:
        ctx.log("no object-storage keys to revoke: this version issues none")
    return {"ssh_keys_revoked": True, "storage": storage}


def _retain_data(ctx: StepContext) -> dict:
    policy = settings.PROVISIONING_DATA_RETENTION
    if policy != "wipe":
        raise StepFailed(f"data retention policy {policy!r} is not implemented; only 'wipe' is. "
                         f"Set PROVISIONING_DATA_RETENTION=wipe or archive the data by hand.")
    ctx.log("policy 'wipe': local NVMe data is not archived; object-storage buckets stay with "
            "the customer")
    return {"policy": policy, "archived": False}


def _wipe(ctx: StepContext) -> dict:
    ctx.run_script(wipe_script(ctx.node.nvme_devices), name="wipe")
    return {"devices": list(ctx.node.nvme_devices)}


def _ready(ctx: StepContext) -> dict:
    health = ctx.driver.health()
    ctx.log(f"{health.gpu_count} GPU(s) visible; {ctx.node.hostname} goes back into stock")
    return {"gpu_count": health.gpu_count}


def _reboot(ctx: StepContext) -> dict:
    ctx.log(f"rebooting {ctx.node.hostname}")
    ctx.driver.power("reboot")
    health = ctx.driver.health()
    ctx.log(f"back up: {health.gpu_count} GPU(s) visible")
    return {"gpu_count": health.gpu_count}


STEP_FUNCTIONS = {
    "reserve": _reserve, "deploy_os": _deploy_os, "configure": _configure, "storage": _storage,
    "stack": _stack, "acceptance": _acceptance, "handover": _handover,
    "revoke_credentials": _revoke_credentials, "retain_data": _retain_data, "wipe": _wipe,
    "ready": _ready, "reboot": _reboot,
}


# --- scripts (the stack issue replaces the bootstrap with its renderers) ----------------------
def configure_script(order: Order, node: Node) -> str:
    devices = " ".join(shlex.quote(d) for d in node.nvme_devices)
    raid = order.nvme.raid
    return f"""#!/bin/sh
set -eu
echo "configuring $TRAINYARD_NODE for order $TRAINYARD_ORDER"
echo "NVMe: {order.nvme} on {len(node.nvme_devices)} device(s): {devices or 'none recorded'}"
if [ -n "{devices}" ] && command -v mdadm >/dev/null 2>&1 && [ "{raid}" != "single" ]; then
  mdadm --create /dev/md0 --run --level={0 if raid == 'raid0' else 10} \\
    --raid-devices={len(node.nvme_devices)} {devices}
fi
echo "network: {order.network} ({order.network.kind}, {order.network.speed_gbps} Gb/s)"
if [ "{order.network.kind}" = "infiniband" ]; then
  command -v ibstat >/dev/null 2>&1 || {{ echo "ibstat not found: no InfiniBand stack"; exit 3; }}
  ibstat | grep -q "State: Active" || {{ echo "no active InfiniBand port"; exit 4; }}
fi
echo "configure done"
"""


def bootstrap_script(order: Order) -> str:
    strategy = order.strategy.slug if order.strategy else "ddp"
    tracker = order.tracker.slug if order.tracker else ""
    return f"""#!/bin/sh
set -eu
echo "training stack: {strategy}{' + ' + tracker if tracker else ''}"
root="${{TRAINYARD_ROOT:-}}"
mkdir -p "$root/etc/trainyard"
cat > "$root/etc/trainyard/env.sh" <<ENV
export TRAINYARD_STRATEGY={strategy}
export TRAINYARD_TRACKER={tracker}
export NNODES=$TRAINYARD_NNODES
export NODE_RANK=$TRAINYARD_NODE_RANK
export NPROC_PER_NODE=$TRAINYARD_GPUS_PER_NODE
export MASTER_ADDR=$TRAINYARD_MASTER_ADDR
export MASTER_PORT=29500
ENV
echo "wrote $root/etc/trainyard/env.sh"
"""


def acceptance_script(expected_gpus: int) -> str:
    return f"""#!/bin/sh
set -eu
echo "acceptance: expecting {expected_gpus} GPU(s)"
command -v nvidia-smi >/dev/null 2>&1 || {{ echo "nvidia-smi not found: no GPU driver"; exit 2; }}
found=$(nvidia-smi --query-gpu=name --format=csv,noheader | wc -l)
echo "found $found GPU(s)"
[ "$found" -eq {expected_gpus} ] || {{ echo "expected {expected_gpus} GPUs, found $found"; exit 1; }}
echo "acceptance passed"
"""


def revoke_script() -> str:
    return """#!/bin/sh
set -eu
echo "revoking customer SSH access"
root="${TRAINYARD_ROOT:-}"
rm -f "$root/etc/trainyard/authorized_keys"
echo "customer keys removed"
"""


def wipe_script(devices: list[str]) -> str:
    if not devices:
        return '#!/bin/sh\necho "no NVMe data devices recorded on this node; nothing to wipe"\n'
    quoted = " ".join(shlex.quote(d) for d in devices)
    return f"""#!/bin/sh
set -eu
for dev in {quoted}; do
  echo "wiping $dev"
  if command -v blkdiscard >/dev/null 2>&1; then blkdiscard -f "$dev"; else
    echo "blkdiscard not found: cannot wipe $dev"; exit 5; fi
done
echo "wipe done"
"""
