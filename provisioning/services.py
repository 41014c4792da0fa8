"""Writes on inventory and runs: node moves, enrolment, runs, retry, swap, day 2, health, sweep.

Every node move goes through ``node_transition`` (the table in ``provisioning.states``) inside
``transaction.atomic()`` with a history row. Work for workers is queued on commit.
"""

from __future__ import annotations

import logging
from datetime import timedelta

from django.conf import settings
from django.core.exceptions import PermissionDenied
from django.db import IntegrityError, transaction
from django.utils import timezone

from portal.accounts.selectors import organisations_for
from portal.orders.models import Order
from portal.orders.states import DomainError, OrderState
from portal.orders.transitions import order_transition
from provisioning import allocation
from provisioning.drivers import DriverError, driver_for, driver_names, secret_option_paths
from provisioning.models import HealthCheck, Node, NodeEvent, ProvisioningRun, StepRun
from provisioning.states import (
    NODE_TRANSITIONS,
    STEP_DONE,
    STEPS,
    NodeState,
    RunKind,
    RunStatus,
    StepStatus,
)

logger = logging.getLogger(__name__)

MAX_TEMPERATURE_C = 85.0


# --- permissions ------------------------------------------------------------------------------
def _require_operator(by) -> None:
    if not getattr(by, "is_operator", False):
        raise PermissionDenied("Only operators can change the node inventory.")


def _require_staff(by) -> None:
    if not (getattr(by, "is_approver", False) or getattr(by, "is_operator", False)):
        raise PermissionDenied("Only staff approvers and operators can do this.")


def require_order_access(by, order: Order) -> None:
    if by is None or not organisations_for(by).filter(pk=order.organisation_id).exists():
        raise PermissionDenied("You cannot act on this order.")


# --- nodes ------------------------------------------------------------------------------------
def node_transition(*, node: Node, name: str, by=None, note: str = "", event_order=None,
                    **fields) -> Node:
    """Moves ``node`` along transition ``name`` with a history row; ``fields`` are saved with it."""
    with transaction.atomic():
        locked = Node.objects.select_for_update().get(pk=node.pk)
        transition = NODE_TRANSITIONS.check(name, locked.state, subject=f"node {locked.hostname}")
        from_state = locked.state
        locked.state = transition.target
        locked.state_changed_at = timezone.now()
        for key, value in fields.items():
            setattr(locked, key, value)
        locked.save(update_fields=["state", "state_changed_at", *fields])
        NodeEvent.objects.create(
            node=locked, actor=by if getattr(by, "pk", None) else None, transition=name,
            from_state=from_state, to_state=transition.target, note=note,
            order=event_order if event_order is not None else None,
        )
    for attr in ("state", "state_changed_at", *fields):
        setattr(node, attr, getattr(locked, attr))
    return node


def node_enrol(*, by, sku, hostname: str, management_address: str, driver: str | None = None,
               fabric_group: str = "", nvme_devices=(), driver_options: dict | None = None,
               notes: str = "", ready: bool = False) -> Node:
    """Adds a server to inventory (enrolled; ``ready=True`` also accepts it into stock)."""
    _require_operator(by)
    hostname = hostname.strip()
    if not hostname or not management_address.strip():
        raise DomainError("A node needs a hostname and a management address.")
    driver = driver or settings.DEFAULT_NODE_DRIVER
    if driver not in driver_names():
        raise DomainError(f"Unknown driver {driver!r}; choose one of {', '.join(driver_names())}.")
    already = DomainError(f"A node named {hostname} is already enrolled (hostnames are "
                          f"case-insensitive).")
    if Node.objects.filter(hostname__iexact=hostname).exists():
        raise already
    if secrets := secret_option_paths(driver_options or {}):
        raise DomainError(f"{', '.join(secrets)}: secrets are not stored in driver options (a "
                          f"plain-text column); give the driver its key through "
                          f"SSH_PRIVATE_KEY_FILE and the BMC password through IPMI_PASSWORD_FILE.")
    with transaction.atomic():
        try:
            with transaction.atomic():  # an enrolment racing this one may take the name first
                node = Node.objects.create(
                    hostname=hostname, sku=sku, management_address=management_address.strip(),
                    driver=driver, fabric_group=fabric_group.strip(), nvme_devices=list(nvme_devices),
                    driver_options=driver_options or {}, notes=notes, state=NodeState.ENROLLED,
                )
        except IntegrityError:
            if Node.objects.filter(hostname__iexact=hostname).exists():
                raise already from None
            raise
        NodeEvent.objects.create(node=node, actor=by if getattr(by, "pk", None) else None,
                                 transition="enrol", from_state=NodeState.ENROLLED,
                                 to_state=NodeState.ENROLLED, note="enrolled")
        if ready:
            node_transition(node=node, name="accept", by=by)
    return node


def node_accept(*, node: Node, by, note: str = "") -> Node:
    _require_operator(by)
    return node_transition(node=node, name="accept", by=by, note=note)


def node_set_maintenance(*, node: Node, by, note: str = "") -> Node:
    """Takes a node out of stock (from enrolled, ready or a failed state)."""
    _require_operator(by)
    if node.state in {NodeState.RESERVED, NodeState.ACTIVE} and node.order_id:
        raise DomainError(f"{node.hostname} serves order {node.order.reference}; swap or terminate "
                          f"it before maintenance.")
    return node_transition(node=node, name="enter_maintenance", by=by, note=note,
                           order_id=None, reserved_until=None)


def node_return_to_service(*, node: Node, by, note: str = "") -> Node:
    _require_operator(by)
    return node_transition(node=node, name="return_to_service", by=by, note=note)


# --- runs -------------------------------------------------------------------------------------
def run_create(*, order: Order, kind: str, nodes, by=None) -> ProvisioningRun:
    run = ProvisioningRun.objects.create(order=order, kind=kind,
                                         created_by=by if getattr(by, "pk", None) else None)
    _steps_create(run, nodes)
    return run


def _steps_create(run: ProvisioningRun, nodes) -> None:
    StepRun.objects.bulk_create([
        StepRun(run=run, node=node, step=spec.name, position=i)
        for node in nodes for i, spec in enumerate(STEPS[run.kind])
    ])


def _send(what: str, send) -> None:
    """Queues after commit. A broker outage must not turn a committed change into an error
    page: the sweeper (beat) queues whatever was left behind."""
    try:
        send()
    except Exception:
        logger.exception("could not queue %s; the sweeper will pick it up", what)


def enqueue_run_start(run: ProvisioningRun) -> None:
    from provisioning import tasks

    run_id = run.pk
    transaction.on_commit(lambda: _send(f"run {run_id}", lambda: tasks.run_start_task.delay(run_id)))


def enqueue_steps(keys: list[tuple[int, int, str]]) -> None:
    from provisioning import tasks

    keys = list(keys)
    transaction.on_commit(lambda: _send(f"steps {keys}", lambda: tasks.enqueue_steps(keys)))


def run_frontier(run: ProvisioningRun) -> list[tuple[int, int, str]]:
    """Per node, the first step that is not done yet, if a worker may take it now."""
    keys = []
    current: dict[int, StepRun] = {}
    for sr in run.steps.exclude(status__in=STEP_DONE).order_by("node_id", "position"):
        current.setdefault(sr.node_id, sr)
    now = timezone.now()
    for sr in current.values():
        claimable = sr.status in (StepStatus.PENDING, StepStatus.RETRYING) or (
            sr.status == StepStatus.RUNNING and sr.lease_expires_at and sr.lease_expires_at < now)
        if claimable:
            keys.append((run.pk, sr.node_id, sr.step))
    return keys


def run_start(*, run_id: int) -> list[tuple[int, int, str]]:
    """Starts a pending run (the order moves on); returns the steps to queue. Idempotent."""
    order_id = ProvisioningRun.objects.filter(pk=run_id).values_list("order_id", flat=True).first()
    if order_id is None:
        return []
    with transaction.atomic():
        # Order first, then run: the order services (cancel, termination) and the reservation
        # sweeper lock in that order too, so two of them never wait on each other.
        order = Order.objects.select_for_update().get(pk=order_id)
        run = ProvisioningRun.objects.select_for_update().get(pk=run_id)
        if run.status == RunStatus.RUNNING:
            return run_frontier(run)  # a redelivered start: queue again, claims stay single
        if run.status != RunStatus.PENDING:
            return []
        if run.kind == RunKind.PROVISION:
            if order.state != OrderState.APPROVED:
                _run_close(run, RunStatus.CANCELLED, f"order is {order.get_state_display().lower()}")
                return []
            order_transition(order=order, name="start_provisioning",
                             note=f"{order.node_count} node(s), run #{run.pk}")
            Node.objects.filter(pk__in=run.steps.values("node_id")).update(reserved_until=None)
        run.status = RunStatus.RUNNING
        run.started_at = timezone.now()
        run.save(update_fields=["status", "started_at"])
    return run_frontier(run)


# The order states in which a run of each kind may still do work (retry, swap).
RUN_ORDER_STATES = {
    RunKind.PROVISION: frozenset({OrderState.PROVISIONING, OrderState.VERIFYING,
                                  OrderState.PROVISION_FAILED}),
    RunKind.TERMINATE: frozenset({OrderState.TERMINATING}),
    RunKind.REBOOT: frozenset({OrderState.ACTIVE}),
    RunKind.REDEPLOY_STACK: frozenset({OrderState.ACTIVE}),
}


def _require_run_order_state(run: ProvisioningRun, order: Order, *, action: str) -> None:
    """An old run of an order that moved on (e.g. terminated) must not touch nodes again."""
    if order.state not in RUN_ORDER_STATES[run.kind]:
        raise DomainError(f"This {run.get_kind_display().lower()} run cannot be {action}: order "
                          f"{order.reference} is {order.get_state_display().lower()}.")


def _run_close(run: ProvisioningRun, status: str, error: str = "") -> None:
    run.status = status
    run.finished_at = timezone.now()
    run.error = error
    run.save(update_fields=["status", "finished_at", "error"])


def _run_resume(run: ProvisioningRun) -> None:
    """Back to running; the steps a worker may take now are queued on commit."""
    run.status = RunStatus.RUNNING
    run.error = ""
    run.finished_at = None
    run.save(update_fields=["status", "error", "finished_at"])
    enqueue_steps(run_frontier(run))


def run_retry_step(*, run: ProvisioningRun, by, step_run: StepRun | None = None,
                   note: str = "") -> ProvisioningRun:
    """Staff: runs the failed step(s) of a failed run again; the order goes back to provisioning."""
    _require_staff(by)
    with transaction.atomic():
        run = ProvisioningRun.objects.select_for_update().select_related("order").get(pk=run.pk)
        failed = run.steps.filter(status=StepStatus.FAILED)
        if step_run is not None:
            failed = failed.filter(pk=step_run.pk)
        failed_steps = list(failed.select_related("node"))
        if not failed_steps:
            raise DomainError("There is no failed step to retry in this run.")
        _require_run_order_state(run, Order.objects.select_for_update().get(pk=run.order_id),
                                 action="retried")
        if run.kind == RunKind.PROVISION and run.order.state == OrderState.PROVISION_FAILED:
            order_transition(order=run.order, name="retry", by=by,
                             note=note or "retry of " + ", ".join(
                                 f"{s.step} on {s.node.hostname}" for s in failed_steps))
        StepRun.objects.filter(pk__in=[s.pk for s in failed_steps]).update(
            status=StepStatus.PENDING, error="", finished_at=None, attempts=0, claimed_by="",
            lease_expires_at=None, retry_at=None)
        _run_resume(run)
    return run


def run_swap_node(*, run: ProvisioningRun, node: Node, by, replacement: Node | None = None,
                  note: str = "") -> Node:
    """Staff: takes a failed node out of a provisioning run and gives the order another one
    (picked by staff, or suggested from the same fabric group). Returns the replacement."""
    _require_staff(by)
    with transaction.atomic():
        run = ProvisioningRun.objects.select_for_update().select_related("order__sku").get(pk=run.pk)
        order = Order.objects.select_for_update().get(pk=run.order_id)
        if run.kind != RunKind.PROVISION:
            raise DomainError("Only a node of a provisioning run can be swapped.")
        _require_run_order_state(run, order, action="changed")
        node = Node.objects.select_for_update().get(pk=node.pk)
        steps = run.steps.filter(node=node)
        if not steps.exists():
            raise DomainError(f"{node.hostname} is not part of this run.")
        if node.state not in {NodeState.FAILED_DEPLOY, NodeState.FAILED_VALIDATION,
                              NodeState.RESERVED}:
            raise DomainError(f"{node.hostname} is {node.get_state_display().lower()}; only a failed "
                              f"or merely reserved node can be swapped.")
        if steps.filter(status=StepStatus.RUNNING).exists():
            raise DomainError(f"A step is running on {node.hostname}; wait for it to finish.")
        if replacement is not None and run.steps.filter(node=replacement).exists():
            raise DomainError(f"{replacement.hostname} already took part in this run.")
        others = Node.objects.filter(order=order).exclude(pk=node.pk)
        group = others.values_list("fabric_group", flat=True).first() if order.is_cluster else None
        new = allocation.nodes_reserve(order=order, by=by, count=1, fabric_group=group,
                                       node_ids=[replacement.pk] if replacement else None)[0]
        for sr in steps.exclude(status=StepStatus.SUCCEEDED):
            sr.status = StepStatus.SKIPPED
            sr.finished_at = sr.finished_at or timezone.now()
            sr.error = "; ".join(filter(None, [sr.error, f"node swapped for {new.hostname}"]))
            sr.save(update_fields=["status", "finished_at", "error"])
        if node.state == NodeState.RESERVED:
            node_transition(node=node, name="unreserve", by=by, event_order=order,
                            note=f"swapped out of order {order.reference}", order_id=None,
                            reserved_until=None)
        else:
            Node.objects.filter(pk=node.pk).update(order=None)
            NodeEvent.objects.create(node=node, actor=by, transition="swap_out",
                                     from_state=node.state, to_state=node.state, order=order,
                                     note=f"swapped out of order {order.reference} for "
                                          f"{new.hostname}; needs an operator")
        Node.objects.filter(pk=new.pk).update(reserved_until=None)
        _steps_create(run, [new])
        if order.state == OrderState.PROVISION_FAILED:
            order_transition(order=order, name="retry", by=by,
                             note=note or f"{node.hostname} swapped for {new.hostname}")
        _run_resume(run)
    return new


# --- termination and day 2 --------------------------------------------------------------------
# What the customer reads when a day-2 run blocks termination.
DAY2_BUSY = {RunKind.REBOOT: "A reboot", RunKind.REDEPLOY_STACK: "A re-deploy of the training stack"}


def termination_start(*, order: Order, by=None) -> ProvisioningRun | None:
    """Called inside the order's termination transition: a terminate run over its nodes.

    Refused while a reboot or re-deploy runs: a worker may still be running one of its steps on
    the node, and termination would pull the node from under it."""
    Order.objects.select_for_update().get(pk=order.pk)  # held until the caller commits
    busy = ProvisioningRun.objects.filter(order=order, kind__in=list(DAY2_BUSY),
                                          status=RunStatus.RUNNING).first()
    if busy is not None:
        raise DomainError(f"{DAY2_BUSY[busy.kind]} is in progress; terminate once it has finished.")
    ProvisioningRun.objects.filter(order=order, status__in=[RunStatus.PENDING, RunStatus.RUNNING]
                                   ).update(status=RunStatus.CANCELLED, finished_at=timezone.now(),
                                            error="order termination requested")
    nodes = list(Node.objects.filter(order=order))
    if not nodes:
        order_transition(order=order, name="finish_termination", note="no node was assigned")
        return None
    run = run_create(order=order, kind=RunKind.TERMINATE, nodes=nodes, by=by)
    enqueue_run_start(run)
    return run


def _day2(*, order: Order, by, kind: str) -> ProvisioningRun:
    require_order_access(by, order)
    with transaction.atomic():
        order = Order.objects.select_for_update().get(pk=order.pk)
        if order.state != OrderState.ACTIVE:
            raise DomainError(f"Order {order.reference} is {order.get_state_display().lower()}; "
                              f"only an active server can be rebooted or re-deployed.")
        busy = ProvisioningRun.objects.filter(order=order, status__in=[RunStatus.PENDING,
                                                                        RunStatus.RUNNING]).first()
        if busy is not None:
            raise DomainError(f"{busy.get_kind_display()} is already in progress on this order.")
        nodes = list(Node.objects.filter(order=order, state=NodeState.ACTIVE))
        if not nodes:
            raise DomainError("This order has no active node.")
        run = run_create(order=order, kind=kind, nodes=nodes, by=by)
        enqueue_run_start(run)
    return run


def server_reboot(*, order: Order, by) -> ProvisioningRun:
    return _day2(order=order, by=by, kind=RunKind.REBOOT)


def server_redeploy_stack(*, order: Order, by) -> ProvisioningRun:
    return _day2(order=order, by=by, kind=RunKind.REDEPLOY_STACK)


# --- health -----------------------------------------------------------------------------------
def node_health_check(*, node: Node) -> HealthCheck:
    """Asks the node's driver for GPU health and stores what it said (I/O: call from a task)."""
    node = Node.objects.select_related("sku__gpu").get(pk=node.pk)
    expected = node.sku.gpu_count
    try:
        report = driver_for(node).health()
    except DriverError as exc:
        return HealthCheck.objects.create(node=node, ok=False, expected_gpu_count=expected,
                                          problems=[f"health check failed: {exc.message}"])
    problems = []
    if report.gpu_count != expected:
        problems.append(f"{report.gpu_count} of {expected} GPUs visible")
    if report.max_temperature_c is not None and report.max_temperature_c > MAX_TEMPERATURE_C:
        problems.append(f"GPU temperature {report.max_temperature_c:.0f} °C "
                        f"(limit {MAX_TEMPERATURE_C:.0f} °C)")
    if report.ecc_errors:
        problems.append(f"{report.ecc_errors} uncorrected ECC error(s)")
    return HealthCheck.objects.create(
        node=node, ok=not problems, gpu_count=report.gpu_count, expected_gpu_count=expected,
        max_temperature_c=report.max_temperature_c, ecc_errors=report.ecc_errors,
        problems=problems, raw=report.raw[:20000],
    )


# --- the sweeper (celery beat) ----------------------------------------------------------------
def step_deadline_s(step: str) -> int:
    return settings.PROVISIONING_STEP_DEADLINES_S.get(step, settings.PROVISIONING_STEP_DEADLINE_S)


def sweep(*, now=None) -> dict:
    """Fails steps that outlived their deadline, re-queues steps whose worker vanished, and gives
    back expired reservations. Safe to run at any time and in parallel."""
    from provisioning import pipeline

    now = now or timezone.now()
    failed = 0
    for sr in StepRun.objects.filter(status__in=[StepStatus.RUNNING, StepStatus.RETRYING],
                                     run__status=RunStatus.RUNNING).select_related("run"):
        deadline = timedelta(seconds=step_deadline_s(sr.step))
        if sr.started_at and now - sr.started_at > deadline:
            minutes = int((now - sr.started_at).total_seconds() // 60)
            if pipeline.step_fail_stuck(step_run=sr, message=(
                    f"{sr.step} timed out: still unfinished after {minutes} min "
                    f"(deadline {int(deadline.total_seconds() // 60)} min)")):
                failed += 1
    grace = timedelta(seconds=settings.PROVISIONING_STEP_LEASE_S)
    requeue = []
    for run in ProvisioningRun.objects.filter(status=RunStatus.RUNNING):
        for key in run_frontier(run):
            sr = run.steps.get(node_id=key[1], step=key[2])
            quiet_since = sr.lease_expires_at or sr.retry_at or _previous_finished(sr) or run.started_at
            if quiet_since is None or now - quiet_since > grace:
                requeue.append(key)
    from provisioning import tasks

    if requeue:
        tasks.enqueue_steps(requeue)
    unstarted = list(ProvisioningRun.objects.filter(status=RunStatus.PENDING,
                                                    created_at__lt=now - grace)
                     .values_list("pk", flat=True))
    for run_id in unstarted:
        tasks.run_start_task.delay(run_id)
    expired = allocation.reservations_expire(now=now)
    return {"failed": failed, "requeued": len(requeue), "started": len(unstarted),
            "reservations_expired": len(expired)}


def _previous_finished(sr: StepRun):
    prev = (StepRun.objects.filter(run_id=sr.run_id, node_id=sr.node_id, position__lt=sr.position)
            .order_by("-position").values_list("finished_at", flat=True).first())
    return prev
