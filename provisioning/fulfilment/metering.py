"""Which meters of an order are billable now, told to the usage ledger (``portal.billing``) in
the transaction of each move that may change it: the order's hand-over and termination, a node
leaving or re-entering service, the bucket's deletion.

- A node is billed while its order is active and the node serves it: handed over, or being
  re-installed by a day-2 run the customer asked for. Never while the order provisions, after
  provisioning failed, or while the node has failed and waits for staff.
- The bucket is billed from hand-over until it is deleted, its retention after termination
  included; an order without a bucket left stops at termination.
"""

from __future__ import annotations

from datetime import datetime

from portal.billing.models import UsageInterval
from portal.billing.services import usage_sync
from portal.orders.models import Order
from portal.orders.states import OrderState
from provisioning.models import Node
from provisioning.states import NodeState
from provisioning.storage.models import Bucket
from provisioning.storage.states import BucketState

BILLED_NODE_STATES = frozenset({NodeState.ACTIVE, NodeState.CONFIGURING, NodeState.VALIDATING})


def order_meter(*, order: Order | int, cause: str, at: datetime | None = None) -> None:
    order = Order.objects.get(pk=order if isinstance(order, int) else order.pk)
    nodes = {}
    if order.state == OrderState.ACTIVE:
        nodes = dict(Node.objects.filter(order=order, state__in=BILLED_NODE_STATES)
                     .values_list("pk", "hostname"))
    usage_sync(order=order, nodes=nodes, storage=_storage_billed(order), at=at, cause=cause)


def _storage_billed(order: Order) -> bool:
    if order.state == OrderState.ACTIVE:
        return True
    if order.state not in (OrderState.TERMINATING, OrderState.TERMINATED):
        return False
    was_billed = UsageInterval.objects.filter(order=order, kind=UsageInterval.Kind.STORAGE,
                                              ended_at=None).exists()
    if order.state == OrderState.TERMINATING:
        return was_billed  # the hand-back decides whether the bucket is kept
    return was_billed and Bucket.objects.filter(
        order=order, state__in=[BucketState.ACTIVE, BucketState.RETAINED]).exists()
