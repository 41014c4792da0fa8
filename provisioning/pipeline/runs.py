"""Runs: create one over an order's nodes, start it, find the steps a worker may take, cancel.

Every run status change goes through ``run_transition`` (the table in ``provisioning.states``).
Nothing here queues work: callers hand the returned step keys to ``provisioning.pipeline.enqueue`` (or,
in a task, to ``provisioning.tasks.enqueue_steps``).
"""

from __future__ import annotations

from django.db import transaction
from django.utils import timezone

from portal.accounts.principals import api_key_of
from portal.core.states import DomainError, actor_or_none
from portal.orders.models import Order, OrderEvent
from portal.orders.states import OrderState
from portal.orders.transitions import order_transition
from provisioning.models import Node, ProvisioningRun, StepRun
from provisioning.states import RUN_OPEN, STEP_DONE, STEPS, RunKind, RunStatus, StepStatus
from provisioning.transitions import run_transition

StepKey = tuple[int, int, str]  # (run_id, node_id, step)

# The order states in which a run of each kind may still do work (retry, swap).
RUN_ORDER_STATES = {
    RunKind.PROVISION: frozenset({OrderState.PROVISIONING, OrderState.VERIFYING,
                                  OrderState.PROVISION_FAILED}),
    # Cancelled: a failed order's nodes are wiped after its cancellation (fulfilment.order_cancel).
    RunKind.TERMINATE: frozenset({OrderState.TERMINATING, OrderState.CANCELLED}),
    RunKind.REBOOT: frozenset({OrderState.ACTIVE}),
    RunKind.REDEPLOY_STACK: frozenset({OrderState.ACTIVE}),
    RunKind.SYNC_KEYS: frozenset({OrderState.ACTIVE}),
}


# Day-2 runs are audited on the order too, so its history says who asked for what and when.
DAY2_KINDS = frozenset({RunKind.REBOOT, RunKind.REDEPLOY_STACK, RunKind.ROTATE_STORAGE_KEY,
                        RunKind.SYNC_KEYS})


def run_create(*, order: Order, kind: str, nodes, by=None) -> ProvisioningRun:
    run = ProvisioningRun.objects.create(order=order, kind=kind, created_by=actor_or_none(by))
    steps_create(run, nodes)
    if kind in DAY2_KINDS:
        OrderEvent.objects.create(order=order, actor=actor_or_none(by), api_key=api_key_of(by),
                                  transition=kind, from_state=order.state, to_state=order.state,
                                  note=f"run #{run.pk}")
    return run


def steps_create(run: ProvisioningRun, nodes) -> None:
    StepRun.objects.bulk_create([
        StepRun(run=run, node=node, step=spec.name, position=i)
        for node in nodes for i, spec in enumerate(STEPS[run.kind])
    ])


def run_frontier(run: ProvisioningRun) -> list[StepKey]:
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


def run_start(*, run_id: int) -> list[StepKey]:
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
                run_transition(run=run, name="cancel",
                               error=f"order is {order.get_state_display().lower()}")
                return []
            order_transition(order=order, name="start_provisioning",
                             note=f"{order.node_count} node(s), run #{run.pk}")
            Node.objects.filter(pk__in=run.steps.values("node_id")).update(reserved_until=None)
        run_transition(run=run, name="start")
    return run_frontier(run)


def run_resume(run: ProvisioningRun, *, by=None, note: str = "") -> list[StepKey]:
    """A failed run works again (staff retried a step or swapped a node); returns the steps a
    worker may take now. A run that is still running just gets its frontier."""
    if run.status != RunStatus.RUNNING:
        run_transition(run=run, name="resume", by=by, note=note)
    return run_frontier(run)


def runs_cancel(*, order: Order, reason: str, by=None) -> int:
    """Cancels the pending and running runs of ``order`` (the one place that does); a worker
    that is still inside a step of one stops at its next record. Returns how many."""
    runs = list(ProvisioningRun.objects.select_for_update().filter(order=order,
                                                                   status__in=RUN_OPEN))
    for run in runs:
        run_transition(run=run, name="cancel", by=by, error=reason)
    return len(runs)


def require_run_order_state(run: ProvisioningRun, order: Order, *, action: str) -> None:
    """An old run of an order that moved on (e.g. terminated) must not touch nodes again."""
    if order.state not in RUN_ORDER_STATES[run.kind]:
        raise DomainError(f"This {run.get_kind_display().lower()} run cannot be {action}: order "
                          f"{order.reference} is {order.get_state_display().lower()}.")
