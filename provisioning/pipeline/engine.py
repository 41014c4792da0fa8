"""The engine: how a step is claimed, run under a lease and recorded, and retried with backoff.

A step is one ``StepRun`` row keyed by (run, node, step). A worker claims it with a conditional
UPDATE (only from pending / waiting-to-retry once its ``retry_at`` has come / running with a
lapsed lease), holds it under a lease it renews while it works, and records the outcome with
another conditional UPDATE on its own claim token. So a succeeded step is never executed
again, a redelivered task returns early (or waits for the retry time), and a step whose worker
died is taken over once the lease lapses.

State changes (node, order, run) happen in the same transaction as the step's outcome; driver
I/O happens outside any transaction. What each step does is in ``provisioning.pipeline.steps``.

Fencing: each claim also takes the next fencing token of its node (``Node.fence``), which every
driver operation carries; the node refuses an older token (see ``provisioning.drivers.base``).
A step whose lease cannot be kept stops its command on the node (``pipeline.lease``). A step
does not start on a node while an execution of an earlier run still works there: that run is
over (failed, cancelled), so the execution is asked to stop, and the step waits until it has.
Database errors (a dropped connection, a failover) are transient: the connection is closed and
the work retried (``pipeline.dbretry``).

A step that raises ``StepWaiting`` (a cluster's acceptance waiting for the other nodes) is not a
failed attempt: it waits to retry without using up PROVISIONING_STEP_MAX_ATTEMPTS, for as long as
the step's deadline allows, counted from its first execution (``started_at``).
"""

from __future__ import annotations

import json
import logging
import random
import time
import uuid
from dataclasses import dataclass
from datetime import timedelta

from celery.exceptions import SoftTimeLimitExceeded
from django.conf import settings
from django.db import transaction
from django.db.models import BigIntegerField, F, Q, Value
from django.db.models.functions import Coalesce, Greatest
from django.urls import reverse
from django.utils import timezone

from portal.accounts.staff_notifications import OPERATORS, staff_notify_later
from portal.core.metrics import PROVISIONING_FAILURES, step_observe
from portal.core.states import DomainError
from portal.orders.models import Order
from portal.orders.states import OrderState
from portal.orders.transitions import order_transition
from provisioning.drivers import DriverError, ExecutionStopped, Fence
from provisioning.fulfilment.metering import order_meter
from provisioning.models import Node, ProvisioningRun, StepRun
from provisioning.pipeline.context import LogWriter, StepContext, StepFailed, StepWaiting
from provisioning.pipeline.dbretry import DB_ERRORS, reset_connection, with_db_retry
from provisioning.pipeline.lease import Lease
from provisioning.pipeline.runs import StepKey
from provisioning.pipeline.steps import STEP_FUNCTIONS
from provisioning.pipeline.steps.acceptance import AcceptanceResult
from provisioning.states import (
    NODE_TRANSITIONS,
    STEP_DONE,
    NodeState,
    RunKind,
    RunStatus,
    StepSpec,
    StepStatus,
    step_spec,
)
from provisioning.transitions import node_transition, run_transition
from provisioning.webhooks import acceptance_failed_publish, termination_stalled_publish

logger = logging.getLogger(__name__)
ACCESS_STEP = "revoke_access"  # the termination's first step: the customer's access ends

# What the step log (shown to the customer) says about a crash; the details go to staff.
INTERNAL_ERROR_LINE = "internal error; our staff has been told"
# StepRun.error of a step that waits (StepWaiting): the next execution knows it only looked.
WAITING_PREFIX = "waiting: "
# What the customer reads about a retry; the driver's message (hosts, ports, driver options)
# goes to the staff-only line beside it.
RETRY_LINE = "attempt {attempt} hit a temporary problem; retrying in {delay:.1f} s"
FAILED_LINE = "{label} could not be completed; our staff has been told"


def _log_for_both(log: LogWriter, *, staff: str, customer: str) -> None:
    """The full text for staff (the run page), a safe summary for the customer's progress card."""
    log(staff)
    log(customer, staff_only=False)
    log.flush()


def step_deadline_s(step: str) -> int:
    """How long ``step`` may run before the sweeper fails it (and its task's soft time limit)."""
    return settings.PROVISIONING_STEP_DEADLINES_S.get(step, settings.PROVISIONING_STEP_DEADLINE_S)


@dataclass(frozen=True)
class StepOutcome:
    """What happened to one task delivery. ``next_steps`` are to be queued by the caller."""

    # succeeded | failed | retry | busy | waiting | already_done | blocked | stopped | lost | missing
    status: str
    next_steps: tuple[StepKey, ...] = ()
    retry_in_s: float | None = None
    message: str = ""


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
    earlier = _earlier_execution(sr, now)
    if earlier is not None:
        # Wait (the task retries) until the earlier execution has stopped; it was asked to.
        wait_s = min((earlier.lease_expires_at - now).total_seconds(),
                     settings.PROVISIONING_STEP_LEASE_S / 3) + 1
        return StepOutcome("busy", retry_in_s=max(1.0, wait_s),
                           message=f"waiting for {earlier.step} of run #{earlier.run_id} to stop")
    if sr.status == StepStatus.RUNNING and sr.lease_expires_at and sr.lease_expires_at > now:
        # Held: by a live worker (a duplicate delivery), or by a dead one whose lease runs out.
        return StepOutcome("busy", retry_in_s=(sr.lease_expires_at - now).total_seconds() + 1)
    if sr.status == StepStatus.RETRYING and sr.retry_at and sr.retry_at > now:
        # A duplicate delivery of a step that waits out its backoff: not yet.
        return StepOutcome("waiting", retry_in_s=(sr.retry_at - now).total_seconds() + 1)
    lease = timedelta(seconds=settings.PROVISIONING_STEP_LEASE_S)
    if not _claim(sr, token, now):
        return StepOutcome("busy", retry_in_s=lease.total_seconds() + 1)
    return _run_claimed(StepRun.objects.select_related("run").get(pk=sr.pk), token)


def _claim(sr: StepRun, token: str, now) -> bool:
    """Takes the step (conditional UPDATE) and the node's next fencing token, in one transaction
    that holds the node row, so tokens on one node only grow (and start from the clock, in
    microseconds, so a node whose row was recreated still accepts them)."""
    lease = timedelta(seconds=settings.PROVISIONING_STEP_LEASE_S)
    with transaction.atomic():
        Node.objects.select_for_update().filter(pk=sr.node_id).values_list("pk", flat=True).get()
        claimed = StepRun.objects.filter(pk=sr.pk).filter(
            Q(status=StepStatus.PENDING)
            | Q(status=StepStatus.RETRYING, retry_at__isnull=True)
            | Q(status=StepStatus.RETRYING, retry_at__lte=now)
            | Q(status=StepStatus.RUNNING, lease_expires_at__lt=now)
        ).update(status=StepStatus.RUNNING, claimed_by=token, attempts=F("attempts") + 1,
                 executions=F("executions") + 1, started_at=Coalesce(F("started_at"), now),
                 claimed_at=now, lease_expires_at=now + lease, retry_at=None,
                 stop_requested=False)
        if claimed != 1:
            return False
        # Larger than every token before it, and than any token of a previous life of this
        # node's row (re-enrolled, database restored): the node keeps the newest it has seen.
        # (A bigint parameter: bound by the server as a plain int's int4, it would wrap.)
        micros = Value(int(now.timestamp() * 1_000_000), output_field=BigIntegerField())
        Node.objects.filter(pk=sr.node_id).update(fence=Greatest(F("fence") + 1, micros))
        fence = Node.objects.values_list("fence", flat=True).get(pk=sr.node_id)
        StepRun.objects.filter(pk=sr.pk).update(fence=fence)
    return True


def _earlier_execution(sr: StepRun, now) -> StepRun | None:
    """An execution of another run that may still work on ``sr``'s node, if any.

    One whose run is over (failed, cancelled: e.g. the order is terminating) is asked to stop
    (its lease renewal then fails and the worker cancels the command). One whose lease lapsed
    has no live worker: it is closed here, and the node's fence refuses it from now on."""
    others = (StepRun.objects.filter(node_id=sr.node_id, status=StepStatus.RUNNING)
              .exclude(run_id=sr.run_id).select_related("run"))
    for other in others:
        live = other.lease_expires_at is not None and other.lease_expires_at > now
        if other.run.status == RunStatus.RUNNING:
            if live:
                return other
            continue
        if live:
            if not other.stop_requested:
                StepRun.objects.filter(pk=other.pk, status=StepStatus.RUNNING).update(
                    stop_requested=True)
            return other
        StepRun.objects.filter(pk=other.pk, status=StepStatus.RUNNING,
                               claimed_by=other.claimed_by).update(
            status=StepStatus.FAILED, finished_at=now, lease_expires_at=None,
            error=f"stopped: its worker stopped renewing the claim and run #{sr.run_id} needs "
                  f"the node")
    return None


def _run_claimed(sr: StepRun, token: str) -> StepOutcome:
    run = sr.run
    spec = step_spec(run.kind, sr.step)
    node = Node.objects.select_related("sku__gpu").get(pk=sr.node_id)
    order = Order.objects.select_related("sku__gpu", "nvme", "network", "storage_provider",
                                         "strategy", "tracker").get(pk=run.order_id)
    log = LogWriter(sr.pk, sr.executions)
    if sr.executions > 1 and not sr.error.startswith(WAITING_PREFIX):  # a wait only looked
        log(f"execution {sr.executions} of {spec.label.lower()} (attempt {sr.attempts})")
    fence = Fence(token=sr.fence, execution=token)
    ctx = StepContext(run=run, order=order, node=node, step_run=sr, log=log, fence=fence)
    try:
        with transaction.atomic():
            _on_start(ctx, spec)
    except DomainError as exc:
        log.flush()
        why = f"{spec.label} cannot start: {exc}"
        return _record(lambda: _fail(sr, why, token=token, log=log))
    except DB_ERRORS as exc:
        reset_connection()
        why = _db_lost(spec, exc)
        return _record(lambda: _transient(sr, why, token=token, log=log))
    heartbeat = Lease(sr.pk, token, fence)
    heartbeat.start()
    started = time.monotonic()
    try:
        kind, value = _call_step(ctx, spec)
    finally:
        heartbeat.stop()
        log.flush()
    step_observe(step=sr.step, driver=node.driver, outcome=kind, seconds=time.monotonic() - started)
    if heartbeat.lost:
        _log_for_both(log, staff=f"execution {sr.executions} lost its claim ({heartbeat.lost}); "
                                 f"stopped", customer=f"execution {sr.executions} stopped")
        if heartbeat.stop_requested:
            return _record(lambda: _stopped(sr, f"stopped: {heartbeat.lost}", token=token))
    if kind == "ok" and (why := _unstorable(value or {}, sr.step)):
        kind, value = "internal", why
    if kind == "ok":
        return _record(lambda: _succeed(sr, spec, value or {}, token=token))
    if kind == "transient":
        return _record(lambda: _transient(sr, value, token=token, log=log))
    if kind == "waiting":
        return _record(lambda: _wait(sr, spec, value, token=token, log=log))
    # An internal error's details (exception, message) are for staff: the step error and the
    # run page have them; the log, which the customer's progress card shows, says less.
    kept = None if _unstorable(ctx.result, sr.step) else ctx.result
    return _record(lambda: _fail(sr, value, token=token, log=log, result=kept,
                                 public_message=INTERNAL_ERROR_LINE if kind == "internal" else None))


def _call_step(ctx: StepContext, spec) -> tuple[str, object]:
    """Runs the step's function; its outcome as (kind, value): ok (the result), transient,
    waiting (the StepWaiting), permanent or internal (a message)."""
    step = ctx.step_run.step
    try:
        result = STEP_FUNCTIONS[step](ctx).to_dict()
    except ExecutionStopped as exc:
        return "transient", exc.message
    except StepWaiting as exc:
        return "waiting", exc
    except DriverError as exc:
        return ("permanent", exc.message) if exc.permanent else ("transient", exc.message)
    except StepFailed as exc:
        ctx.result.update(exc.result)
        return "permanent", exc.message
    except SoftTimeLimitExceeded:
        return "transient", f"{spec.label} hit the task time limit"
    except DB_ERRORS as exc:  # a database blip, not a broken step: retried like one
        reset_connection()
        return "transient", _db_lost(spec, exc)
    except Exception as exc:
        logger.exception("step crashed", extra={"step": step, "node": ctx.node.hostname})
        return "internal", f"internal error in {step}: {type(exc).__name__}: {exc}"
    if not ctx.log.said:  # every step leaves the customer one line
        ctx.log.say(f"{spec.label}: done")
    return "ok", result


def _unstorable(result: dict, step: str) -> str | None:
    """Why ``result`` cannot go into the JSON column (PostgreSQL refuses NaN), or None."""
    try:
        json.dumps(result, allow_nan=False)
    except (TypeError, ValueError) as exc:
        return f"internal error in {step}: its result cannot be stored ({exc})"
    return None


def _record(fn) -> StepOutcome:
    """Records an outcome; the writes are conditional on the claim, so a retry is safe."""
    return with_db_retry(fn, what="recording a step outcome")


def _db_lost(spec: StepSpec, exc: Exception) -> str:
    first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    return f"database connection lost during {spec.label.lower()} ({first})"


def _stopped(sr: StepRun, message: str, *, token: str) -> StepOutcome:
    """An execution of a run that is over stopped because a later run needs the node: the
    step ends failed with the reason; node, run and order belong to the later run."""
    StepRun.objects.filter(pk=sr.pk, status=StepStatus.RUNNING, claimed_by=token).update(
        status=StepStatus.FAILED, finished_at=timezone.now(), error=message,
        lease_expires_at=None, retry_at=None)
    return StepOutcome("stopped", message=message)


def _on_start(ctx: StepContext, spec: StepSpec) -> None:
    node = Node.objects.select_for_update().get(pk=ctx.node.pk)
    if node.order_id != ctx.run.order_id:  # a stale run must not touch another order's node
        raise DomainError(f"{node.hostname} no longer serves order {ctx.order.reference} (it is "
                          f"{node.get_state_display().lower()}); nothing was done.")
    if spec.enter:
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
            if StepRun.objects.filter(pk=sr.pk, status=StepStatus.SUCCEEDED,
                                      claimed_by=token).exists():
                return _next(sr, run)  # recorded by our previous try (its commit went through)
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
    return _next(sr, run)


def _next(sr: StepRun, run: ProvisioningRun) -> StepOutcome:
    if run.status != RunStatus.RUNNING:
        return StepOutcome("succeeded")
    following = (StepRun.objects.filter(run_id=sr.run_id, node_id=sr.node_id,
                                        position=sr.position + 1).values_list("step", flat=True).first())
    return StepOutcome("succeeded", next_steps=((sr.run_id, sr.node_id, following),) if following else ())


def _still_ours(node: Node, run: ProvisioningRun, transition: str) -> bool:
    """Whether a stopped run's late step may still move ``node`` (e.g. a cluster node finishing
    after another node failed the run): only while the node serves the order and the move fits."""
    return node.order_id == run.order_id and NODE_TRANSITIONS.get(transition).allowed_from(node.state)


def _run_complete(run: ProvisioningRun) -> None:
    order = Order.objects.select_for_update().get(pk=run.order_id)
    if run.kind == RunKind.PROVISION:
        if order.state == OrderState.PROVISIONING:
            order_transition(order=order, name="verify", note="all nodes installed")
        order_transition(order=order, name="activate",
                         note=f"{order.node_count} node(s) passed acceptance and were handed over",
                         failure_reason="")
        order_meter(order=order, cause="hand-over")
    elif run.kind == RunKind.TERMINATE and order.state == OrderState.TERMINATING:
        # (A cancelled order's nodes are wiped too: the order stays cancelled.)
        order_transition(order=order, name="finish_termination", note="all nodes wiped")
        order_meter(order=order, cause="hand-back done")
    run_transition(run=run, name="succeed", note="all steps done")


def _transient(sr: StepRun, message: str, *, token: str, log: LogWriter) -> StepOutcome:
    attempts = StepRun.objects.values_list("attempts", flat=True).get(pk=sr.pk)
    if attempts >= settings.PROVISIONING_STEP_MAX_ATTEMPTS:
        return _fail(sr, f"gave up after {attempts} attempts: {message}", token=token, log=log)
    delay = backoff_s(attempts)
    waiting = StepRun.objects.filter(pk=sr.pk, status=StepStatus.RUNNING, claimed_by=token).update(
        status=StepStatus.RETRYING, retry_at=timezone.now() + timedelta(seconds=delay),
        error=f"attempt {attempts}: {message}", claimed_by="", lease_expires_at=None)
    if waiting != 1:
        return StepOutcome("lost", message="another worker took the step over")
    _log_for_both(log, staff=f"attempt {attempts} failed: {message}; retrying in {delay:.1f} s",
                  customer=RETRY_LINE.format(attempt=attempts, delay=delay))
    return StepOutcome("retry", retry_in_s=delay, message=message)


def _wait(sr: StepRun, spec: StepSpec, waiting: StepWaiting, *, token: str,
          log: LogWriter) -> StepOutcome:
    """The step looked and must wait: back to waiting-to-retry, the attempt given back (the
    claim counted it), until the step's deadline from its first execution has passed."""
    now = timezone.now()
    deadline_s = step_deadline_s(sr.step)
    waited_s = (now - (sr.started_at or now)).total_seconds()
    if waited_s + waiting.retry_after_s > deadline_s:
        return _fail(sr, f"gave up waiting after {_span(waited_s)} (the step's deadline is "
                         f"{_span(deadline_s)}): {waiting.message}", token=token, log=log)
    error = WAITING_PREFIX + waiting.message
    done = StepRun.objects.filter(pk=sr.pk, status=StepStatus.RUNNING, claimed_by=token).update(
        status=StepStatus.RETRYING, retry_at=now + timedelta(seconds=waiting.retry_after_s),
        attempts=Greatest(F("attempts") - 1, Value(0)), error=error, claimed_by="",
        lease_expires_at=None)
    if done != 1:
        return StepOutcome("lost", message="another worker took the step over")
    if sr.error != error:  # say it once, not at every look
        _log_for_both(log, staff=f"{spec.label}: {waiting.message}; looking again every "
                                 f"{waiting.retry_after_s:.0f} s",
                      customer=f"{spec.label}: waiting for the other servers of your order")
    return StepOutcome("waiting", retry_in_s=waiting.retry_after_s, message=waiting.message)


def _span(seconds: float) -> str:
    return f"{int(seconds)} s" if seconds < 60 else f"{int(seconds // 60)} min"


def backoff_s(attempt: int) -> float:
    """Exponential backoff with jitter: base·2^(attempt−1), capped, times a factor in [0.5, 1]."""
    base = settings.PROVISIONING_RETRY_BASE_MS / 1000
    cap = settings.PROVISIONING_RETRY_MAX_MS / 1000
    return min(cap, base * 2 ** max(0, attempt - 1)) * random.uniform(0.5, 1.0)


def _fail(sr: StepRun, message: str, *, token: str | None, log: LogWriter | None = None,
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
        label = step_spec(run.kind, sr.step).label
        _log_for_both(log, staff=f"FAILED: {message}",
                      customer=f"FAILED: {public_message or FAILED_LINE.format(label=label)}")
    return StepOutcome("stopped" if cancelled else "failed", message=message)


def _fail_run(run: ProvisioningRun, sr: StepRun, message: str) -> None:
    """A step of ``run`` failed for good: node, run and order move to their failed states."""
    spec = step_spec(run.kind, sr.step)
    node = Node.objects.get(pk=sr.node_id)
    # A node that went to maintenance or now serves another order is not this run's to fail.
    if spec.on_failure and node.state != NodeState.MAINTENANCE and node.order_id == run.order_id:
        if NODE_TRANSITIONS.get(spec.on_failure).allowed_from(node.state):
            node_transition(node=node, name=spec.on_failure, event_order=run.order,
                            note=f"{spec.label}: {message}")
    summary = f"{spec.label} failed on {node.hostname}: {message}"
    PROVISIONING_FAILURES.labels(kind=run.kind, step=sr.step).inc()
    if run.status == RunStatus.RUNNING:
        run_transition(run=run, name="fail", error=summary)
    order = Order.objects.select_for_update().get(pk=run.order_id)
    if run.kind == RunKind.PROVISION and order.state in (OrderState.PROVISIONING,
                                                         OrderState.VERIFYING):
        order_transition(order=order, name="fail", note=summary, failure_reason=summary)
        staff_notify_later(
            role=OPERATORS, subject=f"Provisioning of {order.reference} failed",
            lines=[f"Provisioning of order {order.reference}: {order.servers_label} for "
                   f"{order.organisation.name} failed.", summary[:500],
                   "Retry the step or swap the node from the run page."],
            path=reverse("provisioning:run", args=[run.pk]))
        if sr.step == "acceptance":
            stored = StepRun.objects.filter(pk=sr.pk).values_list("result", flat=True).first()
            report = AcceptanceResult.from_dict(stored).report
            acceptance_failed_publish(order=order, hostname=node.hostname, failed_checks=[
                f"{c.name} ({c.detail})" for c in report.checks if not c.ok])
    else:
        Order.objects.filter(pk=order.pk).update(failure_reason=summary)
        if run.kind == RunKind.TERMINATE:
            _termination_stalled(run, order, node, spec, summary)


def _termination_stalled(run: ProvisioningRun, order: Order, node: Node, spec: StepSpec,
                         summary: str) -> None:
    """The hand-back stopped: operators are e-mailed with the run's link (the staff home lists
    it too) and the customer's or reseller's webhook hears it, after the commit. Whether the
    customer's access has ended depends on the step that stopped (it is the first)."""
    access_ended = spec.name != ACCESS_STEP
    state = ("The customer's access is already ended" if access_ended else
             "The customer's access could NOT be ended: end it by hand first (power the node "
             "off through its BMC if it does not answer)")
    staff_notify_later(
        role=OPERATORS, subject=f"Termination of {order.reference} stopped on {node.hostname}",
        lines=[f"The termination of order {order.reference} ({order.organisation.name}) stopped "
               f"at '{spec.label}' on {node.hostname}. {state}, and the node is out of stock.",
               summary[:1000], "Fix the cause, then retry the step from the run page."],
        path=reverse("provisioning:run", args=[run.pk]))
    termination_stalled_publish(order=order, hostname=node.hostname, step=spec.label,
                                access_ended=access_ended)


def step_fail_stuck(*, step_run: StepRun, message: str) -> bool:
    """Fails an execution that outlived its deadline, whoever holds it (the sweeper's move).
    Its worker's lease renewal then finds the step failed and stops the command."""
    outcome = _fail(step_run, message, token=None,
                    claim=Q(status=StepStatus.RUNNING, claimed_by=step_run.claimed_by,
                            executions=step_run.executions))
    if outcome.status == "failed":
        log = LogWriter(step_run.pk, step_run.executions)
        label = step_spec(step_run.run.kind, step_run.step).label
        _log_for_both(log, staff=f"FAILED: {message}",
                      customer=f"FAILED: {FAILED_LINE.format(label=label)}")
        return True
    return False


