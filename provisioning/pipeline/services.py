"""Staff on a failed run: retry a step, swap a node for another of the same SKU. Run status
changes go through ``run_transition`` inside ``transaction.atomic()``; work is queued on commit."""

from __future__ import annotations

from django.db import transaction
from django.utils import timezone

from portal.core.states import DomainError
from portal.orders.models import Order
from portal.orders.states import OrderState
from portal.orders.transitions import order_transition
from provisioning.inventory import allocation
from provisioning.models import Node, NodeEvent, ProvisioningRun, StepRun
from provisioning.permissions import require_staff
from provisioning.pipeline.enqueue import (
    enqueue_steps,
)
from provisioning.pipeline.runs import require_run_order_state, run_resume, steps_create
from provisioning.states import (
    NodeState,
    RunKind,
    StepStatus,
)
from provisioning.transitions import node_transition


# --- runs: retry and swap (staff) ---------------------------------------------------------
def run_retry_step(*, run: ProvisioningRun, by, step_run: StepRun | None = None,
                   note: str = "") -> ProvisioningRun:
    """Staff: runs the failed step(s) of a failed run again; the order goes back to provisioning."""
    require_staff(by)
    with transaction.atomic():
        run = ProvisioningRun.objects.select_for_update().select_related("order").get(pk=run.pk)
        failed = run.steps.filter(status=StepStatus.FAILED)
        if step_run is not None:
            failed = failed.filter(pk=step_run.pk)
        failed_steps = list(failed.select_related("node"))
        if not failed_steps:
            raise DomainError("There is no failed step to retry in this run.")
        require_run_order_state(run, Order.objects.select_for_update().get(pk=run.order_id),
                                action="retried")
        if run.kind == RunKind.PROVISION and run.order.state == OrderState.PROVISION_FAILED:
            order_transition(order=run.order, name="retry", by=by,
                             note=note or "retry of " + ", ".join(
                                 f"{s.step} on {s.node.hostname}" for s in failed_steps))
        # A new attempt window: attempts, start time and claim start afresh (the deadline
        # counts from the next execution's start; a worker of the old one is fenced off).
        StepRun.objects.filter(pk__in=[s.pk for s in failed_steps]).update(
            status=StepStatus.PENDING, error="", finished_at=None, attempts=0, claimed_by="",
            started_at=None, claimed_at=None, lease_expires_at=None, retry_at=None,
            stop_requested=False)
        enqueue_steps(run_resume(run, by=by, note=note or "failed step(s) retried"))
    return run


def run_swap_node(*, run: ProvisioningRun, node: Node, by, replacement: Node | None = None,
                  note: str = "") -> Node:
    """Staff: takes a failed node out of a provisioning run and gives the order another one
    (picked by staff, or suggested from the same fabric group). Returns the replacement."""
    require_staff(by)
    with transaction.atomic():
        run = ProvisioningRun.objects.select_for_update().select_related("order__sku").get(pk=run.pk)
        order = Order.objects.select_for_update().get(pk=run.order_id)
        if run.kind != RunKind.PROVISION:
            raise DomainError("Only a node of a provisioning run can be swapped.")
        require_run_order_state(run, order, action="changed")
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
        steps_create(run, [new])
        if order.state == OrderState.PROVISION_FAILED:
            order_transition(order=order, name="retry", by=by,
                             note=note or f"{node.hostname} swapped for {new.hostname}")
        enqueue_steps(run_resume(run, by=by, note=f"{node.hostname} swapped for {new.hostname}"))
    return new
