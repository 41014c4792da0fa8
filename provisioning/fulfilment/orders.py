"""What fulfilment does when an order moves: submitted (automatic approval), cancelled (reserved
nodes back to stock, open runs cancelled) or terminated (a termination run over its nodes).

Each service applies the order's transition and its consequences in one transaction; work for
the workers is queued on commit. Views and API views call these, not the order transitions.
"""

from __future__ import annotations

from django.db import transaction
from django.utils import timezone

from portal.billing.models import TerminationDeadline
from portal.billing.spend import spend_limit_reached
from portal.core.states import DomainError
from portal.orders.models import Order, OrderEvent
from portal.orders.services import order_place, order_send_for_approval, require_order_access
from portal.orders.states import OrderState
from portal.orders.transitions import order_transition
from portal.quotes.configuration import Configuration
from portal.quotes.models import Quote
from portal.quotes.services import quote_create
from provisioning.fulfilment.approvals import order_approve_automatically
from provisioning.fulfilment.metering import order_meter
from provisioning.models import Node, ProvisioningRun
from provisioning.pipeline.enqueue import enqueue_run_start
from provisioning.pipeline.runs import run_create, runs_cancel
from provisioning.states import NodeState, RunKind, RunStatus
from provisioning.transitions import node_transition

# What the customer reads when a day-2 run blocks termination.
DAY2_BUSY = {RunKind.REBOOT: "A reboot", RunKind.REDEPLOY_STACK: "A re-deploy of the training stack"}


def order_submit(*, order: Order, by) -> Order:
    """Draft → submitted → pending approval; approved at once where the SKU's policy allows it."""
    with transaction.atomic():
        decision = order_send_for_approval(order=order, by=by)
        if decision.automatic and spend_limit_reached(order.organisation):
            OrderEvent.objects.create(order=order, transition="spend_hold",
                                      from_state=order.state, to_state=order.state,
                                      note="the organisation's monthly spend limit is reached: "
                                           "the order waits for staff approval")
        elif decision.automatic:
            order_approve_automatically(order=order, decision=decision)
    return order


@transaction.atomic
def order_create_and_submit(*, by, quote: Quote | None = None, organisation=None,
                            configuration: Configuration | None = None,
                            plan: dict | None = None) -> Order:
    """Places ``quote`` (or a quote made now from ``configuration`` for ``organisation``) and
    submits it, as the API does in one call. All or nothing: a refused submission leaves no
    draft order behind."""
    if quote is None:
        quote = quote_create(organisation=organisation, by=by, configuration=configuration, plan=plan)
    order = order_place(quote=quote, by=by, organisation=organisation)
    return order_submit(order=order, by=by)


def order_cancel(*, order: Order, by, reason: str = "") -> Order:
    """Customer or staff: cancel before provisioning starts, or after it failed (the server
    never ran, so nothing is billed). Reserved nodes go back to stock; nodes the failed run
    touched are wiped by a termination run before they do. ``reason`` is shown to the customer."""
    require_order_access(by, order.organisation_id)
    with transaction.atomic():
        order_transition(order=order, name="cancel", by=by, note=reason)
        for node in Node.objects.select_for_update().filter(order=order, state=NodeState.RESERVED):
            node_transition(node=node, name="unreserve", by=by, event_order=order, order_id=None,
                            reserved_until=None, note=f"order {order.reference} cancelled")
        runs_cancel(order=order, by=by, reason="order cancelled")
        nodes_release(order=order, by=by)
    return order


def order_request_termination(*, order: Order, by, note: str = "") -> Order:
    """Customer or staff: shut the servers down; credentials are revoked and disks wiped."""
    require_order_access(by, order.organisation_id)
    with transaction.atomic():
        order_transition(order=order, name="request_termination", by=by, note=note)
        order_meter(order=order, cause="termination requested")  # billing stops here
        termination_start(order=order, by=by)
    order.refresh_from_db()
    return order


def termination_start(*, order: Order, by=None) -> ProvisioningRun | None:
    """Inside the order's termination transition: a terminate run over its nodes.

    Refused while a reboot or re-deploy runs: a worker may still be running one of its steps on
    the node, and termination would pull the node from under it."""
    Order.objects.select_for_update().get(pk=order.pk)  # held until the caller commits
    busy = ProvisioningRun.objects.filter(order=order, kind__in=list(DAY2_BUSY),
                                          status=RunStatus.RUNNING).first()
    if busy is not None:
        raise DomainError(f"{DAY2_BUSY[busy.kind]} is in progress; terminate once it has finished.")
    runs_cancel(order=order, by=by, reason="order termination requested")
    run = nodes_release(order=order, by=by)
    if run is None:
        order_transition(order=order, name="finish_termination", note="no node was assigned")
        order_meter(order=order, cause="hand-back done")
    return run


def nodes_release(*, order: Order, by=None) -> ProvisioningRun | None:
    """A termination run over the nodes still assigned to ``order`` (credentials revoked, disks
    wiped, back in stock), queued on commit; None when no node is assigned."""
    nodes = list(Node.objects.filter(order=order))
    if not nodes:
        return None
    run = run_create(order=order, kind=RunKind.TERMINATE, nodes=nodes, by=by)
    enqueue_run_start(run)
    return run


def orders_terminate_due(*, now=None) -> list[str]:
    """Terminates every active order whose customer-set "terminate at" has passed (beat task),
    as a customer's request would: the hand-back keeps its checkpoints for the order's retention.
    One busy with a reboot or re-deploy is tried again at the next run. Returns the references."""
    now = now or timezone.now()
    done = []
    for deadline in TerminationDeadline.objects.filter(terminate_at__lte=now,
                                                       order__state=OrderState.ACTIVE):
        try:
            with transaction.atomic():
                order = deadline.order
                order_transition(order=order, name="request_termination",
                                 note=f"the customer's termination time "
                                      f"{deadline.terminate_at:%Y-%m-%d %H:%M} UTC was reached")
                order_meter(order=order, cause="terminate-at reached")
                termination_start(order=order)
            done.append(order.reference)
        except DomainError:
            continue
    return done
