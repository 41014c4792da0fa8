"""Day-2 actions on an active server, started by its customer or staff: reboot, re-deploy the
stack, rotate the bucket's key, drop storage from an order, and a read-only key to a retained bucket."""

from __future__ import annotations

from decimal import Decimal

from django.db import transaction

from portal.core.states import DomainError, actor_or_none
from portal.orders.models import Order, OrderEvent
from portal.orders.services import require_order_access
from portal.orders.states import OrderState
from portal.orders.transitions import order_event_notify_later
from provisioning.drivers import DriverError
from provisioning.models import Node, ProvisioningRun
from provisioning.permissions import require_staff
from provisioning.pipeline.enqueue import (
    enqueue_retention_key,
    enqueue_run_start,
)
from provisioning.pipeline.runs import run_create
from provisioning.pipeline.services import run_retry_step
from provisioning.states import (
    NodeState,
    RunKind,
    RunStatus,
    StepStatus,
)
from provisioning.storage import selectors as storage_selectors
from provisioning.storage import services as storage_services
from provisioning.storage.models import Bucket
from provisioning.storage.states import BucketState


def order_retention_key_request(*, order: Order, by) -> None:
    """The customer asks for a read-only key to its terminated order's retained bucket; a worker
    issues it after the commit."""
    require_order_access(by, order.organisation_id)
    with transaction.atomic():
        storage_services.retention_key_mark_requested(order=order)
        enqueue_retention_key(order.pk)


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
    require_staff(by)
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
