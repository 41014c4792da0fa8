"""Applies one move of the node or run state machine (tables in ``provisioning.states``) with
its history row, through the audited ``portal.core.states.transition``. No I/O."""

from __future__ import annotations

from django.utils import timezone

from portal.core.states import transition
from provisioning.fulfilment.metering import order_meter
from provisioning.models import Node, NodeEvent, ProvisioningRun, RunEvent
from provisioning.states import NODE_TRANSITIONS, RUN_TRANSITIONS, RunStatus


def node_transition(*, node: Node, name: str, by=None, note: str = "", event_order=None,
                    **fields) -> Node:
    """Moves ``node`` along transition ``name`` with a history row; ``fields`` are saved with it."""

    def record(locked, from_state, to_state, actor):
        return NodeEvent.objects.create(node=locked, actor=actor, transition=name,
                                        from_state=from_state, to_state=to_state, note=note,
                                        order=event_order)

    node, _ = transition(node, table=NODE_TRANSITIONS, name=name, by=by, record=record,
                         subject=f"node {node.hostname}",
                         fields={"state_changed_at": timezone.now(), **fields})
    order_id = getattr(event_order, "pk", None) or node.order_id
    if order_id:  # a node leaving or re-entering service starts or stops its meter
        order_meter(order=order_id, cause=f"node {name}")
    return node


def run_transition(*, run: ProvisioningRun, name: str, by=None, note: str = "",
                   error: str | None = None) -> ProvisioningRun:
    """Moves ``run`` along transition ``name`` with a history row. Starting stamps
    ``started_at``; finishing stamps ``finished_at`` and records ``error`` (staff read it);
    resuming clears both."""
    target = RUN_TRANSITIONS.get(name).target
    now = timezone.now()
    if target == RunStatus.RUNNING and name == "start":
        fields = {"started_at": now}
    elif target == RunStatus.RUNNING:
        fields = {"finished_at": None, "error": ""}
    else:
        fields = {"finished_at": now, "error": error or ""}

    def record(locked, from_state, to_state, actor):
        return RunEvent.objects.create(run=locked, actor=actor, transition=name,
                                       from_state=from_state, to_state=to_state,
                                       note=note or error or "")

    run, _ = transition(run, table=RUN_TRANSITIONS, name=name, by=by, record=record,
                        subject=f"run #{run.pk}", state_field="status", fields=fields)
    return run
