"""Writes on inventory and on runs that staff or customers start: node enrolment and moves,
retry and swap of a failed run, day-2 actions (reboot, re-deploy the stack).

Every node move goes through ``node_transition`` and every run status change through
``run_transition`` (tables in ``provisioning.states``) inside ``transaction.atomic()`` with a
history row. Work for workers is queued on commit (``provisioning.enqueue``). What happens when
an order is approved, cancelled or terminated is in ``approvals`` and ``fulfilment``.
"""

from __future__ import annotations

from decimal import Decimal

from django.conf import settings
from django.core.exceptions import PermissionDenied
from django.db import IntegrityError, transaction
from django.utils import timezone

from portal.core.states import DomainError, actor_or_none
from portal.orders.models import Order, OrderEvent
from portal.orders.services import require_order_access
from portal.orders.states import OrderState
from portal.orders.transitions import order_event_notify_later, order_transition
from provisioning import allocation
from provisioning.drivers import DriverError, driver_names, secret_option_paths
from provisioning.enqueue import (
    enqueue_baseline_record,
    enqueue_node_accept_check,
    enqueue_node_power,
    enqueue_retention_key,
    enqueue_run_start,
    enqueue_steps,
)
from provisioning.enrolment import EnrolmentRefused, enrolment_problems
from provisioning.models import Node, NodeEvent, ProvisioningRun, StepRun
from provisioning.node_power import NODE_POWER_ACTIONS, node_power_refusal
from provisioning.runs import require_run_order_state, run_create, run_resume, steps_create
from provisioning.states import (
    HANDBACK_FAILED,
    NODE_TRANSITIONS,
    NodeState,
    RunKind,
    RunStatus,
    StepStatus,
    WipeMethod,
    wipe_method_problem,
)
from provisioning.storage import selectors as storage_selectors
from provisioning.storage import services as storage_services
from provisioning.storage.models import Bucket
from provisioning.storage.states import BucketState
from provisioning.transitions import node_transition


# --- permissions ------------------------------------------------------------------------------
def _require_operator(by) -> None:
    if not getattr(by, "is_operator", False):
        raise PermissionDenied("Only operators can change the node inventory.")


def _require_staff(by) -> None:
    if not (getattr(by, "is_approver", False) or getattr(by, "is_operator", False)):
        raise PermissionDenied("Only staff approvers and operators can do this.")


# --- nodes ------------------------------------------------------------------------------------
def node_enrol(*, by, sku, hostname: str, management_address: str, driver: str | None = None,
               fabric_group: str = "", nvme_devices=(), driver_options: dict | None = None,
               fabric_address: str = "", wipe_method: str | None = None,
               notes: str = "", ready: bool = False) -> Node:
    """Adds a server to inventory (enrolled; ``ready=True`` also accepts it into stock).
    ``wipe_method``: how the hand-back erases its data (the enrol page asks for it explicitly;
    callers that leave it out get blkdiscard with recorded devices, else the data directory)."""
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
    if wipe_method is None:
        wipe_method = WipeMethod.DISCARD if nvme_devices else WipeMethod.FILES
    problems = enrolment_problems(hostname=hostname, management_address=management_address,
                                  driver=driver, driver_options=driver_options)
    if problem := wipe_method_problem(wipe_method, nvme_devices):
        problems["wipe_method"] = problem
    if problems:
        raise EnrolmentRefused(problems)
    with transaction.atomic():
        try:
            with transaction.atomic():  # an enrolment racing this one may take the name first
                node = Node.objects.create(
                    hostname=hostname, sku=sku, management_address=management_address.strip(),
                    driver=driver, fabric_group=fabric_group.strip(), nvme_devices=list(nvme_devices),
                    fabric_address=fabric_address.strip(), wipe_method=wipe_method,
                    driver_options=driver_options or {}, notes=notes, state=NodeState.ENROLLED,
                )
        except IntegrityError:
            if Node.objects.filter(hostname__iexact=hostname).exists():
                raise already from None
            raise
        NodeEvent.objects.create(node=node, actor=actor_or_none(by),
                                 transition="enrol", from_state=NodeState.ENROLLED,
                                 to_state=NodeState.ENROLLED, note="enrolled")
        if ready:  # stock only once the driver reached it and its health check passed
            enqueue_node_accept_check(node, by)
    return node


def node_accept(*, node: Node, by, note: str = "") -> Node:
    """Asks for the node's acceptance check (reachability and health through its driver, in a
    worker); the node stays enrolled, out of stock, until the check passes."""
    _require_operator(by)
    if not NODE_TRANSITIONS.get("accept").allowed_from(node.state):
        raise DomainError(f"{node.hostname} is {node.get_state_display().lower()}; only an enrolled "
                          f"node is checked and accepted into stock.")
    enqueue_node_accept_check(node, by)
    return node


def node_set_maintenance(*, node: Node, by, note: str = "") -> Node:
    """Takes a node out of stock (from enrolled, ready or a failed state)."""
    _require_operator(by)
    if node.state in HANDBACK_FAILED and node.order_id:
        raise DomainError(f"The hand-back of order {node.order.reference} did not finish on "
                          f"{node.hostname}: fix the cause and retry the step from the run page. A "
                          f"node goes into maintenance (and back to stock) only once it is clean.")
    if node.state in {NodeState.RESERVED, NodeState.ACTIVE} and node.order_id:
        raise DomainError(f"{node.hostname} serves order {node.order.reference}; swap or terminate "
                          f"it before maintenance.")
    return node_transition(node=node, name="enter_maintenance", by=by, note=note,
                           order_id=None, reserved_until=None)


def node_return_to_service(*, node: Node, by, note: str = "") -> Node:
    """Asks for the check a node must pass to go from maintenance back into stock (reachability
    and health through its driver, in a worker); it stays in maintenance until it passes."""
    _require_operator(by)
    if not NODE_TRANSITIONS.get("return_to_service").allowed_from(node.state):
        raise DomainError(f"{node.hostname} is {node.get_state_display().lower()}; only a node in "
                          f"maintenance is checked and returned to service.")
    enqueue_node_accept_check(node, by)
    return node


# Driver options that decide what the clean baseline lists (the customer login's home, whether the
# machine's accounts and sockets are listed): changing one makes the baseline moot.
BASELINE_OPTIONS = ("login_user", "test_host")
# What an operator may change on a node; the hostname, SKU and driver stay (enrol anew instead).
EDITABLE_NODE_FIELDS = ("management_address", "fabric_group", "fabric_address", "nvme_devices",
                        "wipe_method", "driver_options", "notes")


def node_update(*, node: Node, by, **changes) -> Node:
    """Operators: changes a node's enrolment facts (address, fabric, data devices and wipe
    method, driver options such as the pinned host key and BMC), checked as at enrolment, with
    an audit event naming what changed. Not while it serves an order."""
    _require_operator(by)
    unknown = set(changes) - set(EDITABLE_NODE_FIELDS)
    if unknown:
        raise DomainError(f"{', '.join(sorted(unknown))} cannot be changed; enrol the node anew.")
    with transaction.atomic():
        node = Node.objects.select_for_update().get(pk=node.pk)
        if node.order_id is not None:
            raise DomainError(f"{node.hostname} serves order {node.order.reference}: change it once "
                              f"the order has released it.")
        if secrets := secret_option_paths(changes.get("driver_options") or {}):
            raise DomainError(f"{', '.join(secrets)}: secrets are not stored in driver options.")
        after = {name: changes.get(name, getattr(node, name)) for name in EDITABLE_NODE_FIELDS}
        problems = enrolment_problems(hostname=node.hostname,
                                      management_address=after["management_address"],
                                      driver=node.driver, driver_options=after["driver_options"])
        if problem := wipe_method_problem(after["wipe_method"], after["nvme_devices"]):
            problems["wipe_method"] = problem
        if problems:
            raise EnrolmentRefused(problems)
        changed = [name for name in EDITABLE_NODE_FIELDS if after[name] != getattr(node, name)]
        if not changed:
            return node
        before_options = node.driver_options
        for name in changed:
            setattr(node, name, after[name])
        fields, note = list(changed), "changed: " + ", ".join(n.replace("_", " ") for n in changed)
        if any((before_options or {}).get(k) != (node.driver_options or {}).get(k)
               for k in BASELINE_OPTIONS):  # the baseline listed another account's home
            node.baseline, node.baseline_at = [], None
            fields += ["baseline", "baseline_at"]
            note += "; the clean baseline is recorded again at the next deploy"
        node.save(update_fields=fields)
        NodeEvent.objects.create(node=node, actor=actor_or_none(by), transition="edit",
                                 from_state=node.state, to_state=node.state, note=note)
    return node


def order_retention_key_request(*, order: Order, by) -> None:
    """The customer asks for a read-only key to its terminated order's retained bucket; a worker
    issues it after the commit."""
    require_order_access(by, order.organisation_id)
    with transaction.atomic():
        storage_services.retention_key_mark_requested(order=order)
        enqueue_retention_key(order.pk)


def node_record_baseline(*, node: Node, by, note: str = "") -> Node:
    """Operators: for a node that has no clean baseline (it entered stock before baselines were
    recorded), records what it holds now as clean, in a worker, after they checked it by hand;
    then its hand-back's attestation can be retried. Audited."""
    _require_operator(by)
    if node.baseline_at is not None:
        raise DomainError(f"{node.hostname} has a clean baseline (recorded "
                          f"{node.baseline_at:%Y-%m-%d %H:%M}); a new one is recorded when it "
                          f"returns to service.")
    enqueue_baseline_record(node, by, note)
    return node


def node_retire(*, node: Node, by, note: str = "") -> Node:
    """Operators: takes a node out of the fleet for good (its history stays)."""
    _require_operator(by)
    if node.order_id is not None:
        raise DomainError(f"{node.hostname} serves order {node.order.reference}: it can be retired "
                          f"once the order has released it.")
    return node_transition(node=node, name="retire", by=by, note=note, reserved_until=None)


# --- runs: retry and swap (staff) ---------------------------------------------------------
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
    _require_staff(by)
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


# --- day 2 ------------------------------------------------------------------------------------
def _day2(*, order: Order, by, kind: str) -> ProvisioningRun:
    require_order_access(by, order.organisation_id)
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


def server_rotate_storage_key(*, order: Order, by) -> ProvisioningRun:
    """Day 2: a new key for the order's bucket on every node; the old key is revoked only after
    the new one is verified (``provisioning.storage.services.credential_rotate``)."""
    if not order.has_object_storage:
        raise DomainError(f"Order {order.reference} has no object storage.")
    if order.is_custom_storage:
        raise DomainError("This order uses your own bucket and keys: rotate them with your provider.")
    if not storage_selectors.storage_for(order):
        raise DomainError("The bucket of this order has not been set up yet.")
    return _day2(order=order, by=by, kind=RunKind.ROTATE_STORAGE_KEY)


# --- staff rescue: drop object storage from a failed order ------------------------------------
DROP_STORAGE = "drop_storage"


def order_drop_storage(*, order: Order, by, note: str = "") -> Order:
    """Staff: removes object storage from an order whose set-up failed (e.g. its provider is
    down for good) and retries the failed steps, so its nodes proceed without a bucket. Audited
    (an OrderEvent with the note), priced without the bucket, the customer told by e-mail.
    Keys already issued are revoked and an (empty) bucket is marked dropped."""
    _require_staff(by)
    with transaction.atomic():
        order = Order.objects.select_for_update(of=("self",)).select_related("storage_provider").get(
            pk=order.pk)
        if order.state != OrderState.PROVISION_FAILED:
            raise DomainError(f"Order {order.reference} is {order.get_state_display().lower()}; "
                              f"storage can be dropped only from an order whose set-up failed.")
        if not order.has_object_storage:
            raise DomainError(f"Order {order.reference} has no object storage to drop.")
        run = (ProvisioningRun.objects.filter(order=order, kind=RunKind.PROVISION,
                                              status=RunStatus.FAILED).order_by("-pk").first())
        if run is None:
            raise DomainError("There is no failed provisioning run to continue.")
        dropped = f"{order.storage_tb} TB on {order.storage_provider}"
        _strip_storage(order)
        event = OrderEvent.objects.create(
            order=order, actor=actor_or_none(by), transition=DROP_STORAGE, from_state=order.state,
            to_state=order.state, note=f"object storage ({dropped}) dropped"
                                       + (f": {note}" if note else ""))
        order_event_notify_later(event.pk)
    _drop_bucket(order, by=by)
    failed = run.steps.filter(status=StepStatus.FAILED).exists()
    if failed:
        run_retry_step(run=run, by=by, note="object storage dropped; failed step(s) retried")
    order.refresh_from_db()
    return order


def _strip_storage(order: Order) -> None:
    """The order without its bucket: storage fields cleared, its price line taken off."""
    kept, hourly, monthly = [], order.price_hourly, order.price_monthly
    for line in order.price_lines or []:
        if str(line.get("label", "")).startswith("Object storage"):
            hourly -= Decimal(str(line.get("hourly") or 0))
            monthly -= Decimal(str(line.get("monthly") or 0))
        else:
            kept.append(line)
    Order.objects.filter(pk=order.pk).update(
        storage_provider=None, storage_tb=0, storage_endpoint_url="", storage_bucket="",
        storage_access_key_id="", storage_secret_key="", price_lines=kept,
        price_hourly=max(hourly, Decimal("0")), price_monthly=max(monthly, Decimal("0")))
    order.refresh_from_db()


def _drop_bucket(order: Order, *, by) -> None:
    bucket = Bucket.objects.filter(order=order, state=BucketState.ACTIVE).first()
    if bucket is None:
        return
    try:
        storage_services.storage_revoke(order=order)
    except DriverError as exc:
        OrderEvent.objects.create(order=order, actor=actor_or_none(by), transition=DROP_STORAGE,
                                  from_state=order.state, to_state=order.state,
                                  note=f"keys of bucket {bucket.name} not revoked ({exc.message}): "
                                       f"revoke them at the provider")
    storage_services.bucket_transition(bucket=bucket, name="drop", by=actor_or_none(by),
                                       note="object storage dropped from the order")


# --- power (operators) -------------------------------------------------------------------------
def node_power_request(*, node: Node, by, action: str, note: str = "") -> NodeEvent:
    """Operators: asks for power on, off or cycle of ``node``; audited now, done by a worker."""
    _require_operator(by)
    if action not in NODE_POWER_ACTIONS:
        raise DomainError(f"Unknown power action {action!r}: on, off or cycle.")
    if problem := node_power_refusal(node):
        raise DomainError(problem)
    with transaction.atomic():
        event = NodeEvent.objects.create(
            node=node, actor=actor_or_none(by), transition=f"power_{action}_requested",
            from_state=node.state, to_state=node.state, note=note[:500])
        enqueue_node_power(node, by, action)
    return event
