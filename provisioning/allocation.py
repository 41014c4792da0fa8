"""Which nodes an order gets. Takes rows with SELECT … FOR UPDATE SKIP LOCKED on PostgreSQL, so
two approvals racing for stock never take the same node and never wait on each other."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import Count
from django.utils import timezone

from portal.core.states import DomainError
from portal.orders.models import Order
from portal.orders.states import OrderState
from portal.orders.transitions import order_transition
from provisioning.models import Node
from provisioning.runs import runs_cancel
from provisioning.states import NodeState
from provisioning.transitions import node_transition


class OutOfStock(DomainError):
    pass


@dataclass(frozen=True)
class Pick:
    """A proposal of nodes for an order (read-only; nothing is locked)."""

    nodes: tuple[Node, ...]
    ready_total: int
    problem: str = ""

    @property
    def ok(self) -> bool:
        return not self.problem


def _ready(sku):
    return Node.objects.filter(sku=sku, state=NodeState.READY)


def _shortage(order, *, count: int, ready: int, group_note: str = "") -> str:
    sku = order.sku.name
    if ready == 0:
        return f"No ready node of {sku} is in stock; this order needs {count}."
    if ready < count:
        word = "node" if ready == 1 else "nodes"
        return f"Only {ready} ready {word} of {sku}; this order needs {count}."
    return group_note or (f"{ready} ready nodes of {sku} are being reserved by other orders "
                          f"right now; this order needs {count}. Try again in a moment.")


def _groups_that_fit(sku, count: int, fabric_group: str | None) -> list[str]:
    rows = (_ready(sku).exclude(fabric_group="").values("fabric_group")
            .annotate(n=Count("pk")).filter(n__gte=count).order_by("n", "fabric_group"))
    groups = [r["fabric_group"] for r in rows]
    if fabric_group is not None:
        groups = [g for g in groups if g == fabric_group]
    return groups  # smallest group that fits first: big groups stay free for big orders


def _group_note(order, count: int, fabric_group: str | None) -> str:
    if fabric_group is not None:
        return (f"Fabric group {fabric_group!r} has fewer than {count} ready nodes of "
                f"{order.sku.name}; the nodes of a cluster must share one fabric.")
    largest = (_ready(order.sku).exclude(fabric_group="").values("fabric_group")
               .annotate(n=Count("pk")).order_by("-n").first())
    return (f"No fabric group has {count} ready nodes of {order.sku.name} together "
            f"(largest: {largest['n'] if largest else 0}); the nodes of a cluster must share one "
            f"fabric.")


def nodes_suggest(*, order, count: int | None = None, fabric_group: str | None = None) -> Pick:
    """What ``nodes_reserve`` would take now, without locking anything (for the approval page)."""
    count = count or order.node_count
    ready = _ready(order.sku).count()
    if count == 1 and fabric_group is None:
        nodes = tuple(_ready(order.sku).order_by("hostname")[:1])
    else:
        groups = _groups_that_fit(order.sku, count, fabric_group)
        nodes = tuple(_ready(order.sku).filter(fabric_group=groups[0]).order_by("hostname")[:count]
                      ) if groups else ()
    if len(nodes) == count:
        return Pick(nodes=nodes, ready_total=ready)
    note = _group_note(order, count, fabric_group) if ready >= count else ""
    return Pick(nodes=(), ready_total=ready, problem=_shortage(order, count=count, ready=ready,
                                                               group_note=note))


def _lock_chosen(order, node_ids, count: int, fabric_group: str | None) -> list[Node]:
    node_ids = list(dict.fromkeys(int(i) for i in node_ids))
    if len(node_ids) != count:
        raise DomainError(f"This order needs {count} node{'s' if count != 1 else ''}; "
                          f"{len(node_ids)} {'was' if len(node_ids) == 1 else 'were'} picked.")
    nodes = list(Node.objects.select_for_update().filter(pk__in=node_ids).order_by("hostname"))
    if len(nodes) != count:
        raise DomainError("A picked node does not exist any more.")
    for node in nodes:
        if node.sku_id != order.sku_id:
            raise DomainError(f"{node.hostname} is a {node.sku.name}; this order is for "
                              f"{order.sku.name}.")
        if node.state != NodeState.READY:
            raise OutOfStock(f"{node.hostname} is not ready any more (it is "
                             f"{NodeState(node.state).label.lower()}); pick another node.")
    groups = {n.fabric_group for n in nodes}
    if count > 1 and (len(groups) != 1 or "" in groups):
        raise DomainError("The nodes of a cluster must all be in one fabric group; "
                          f"the picked nodes are in {', '.join(sorted(g or '(none)' for g in groups))}.")
    if fabric_group is not None and groups != {fabric_group}:
        raise DomainError(f"The replacement must be in fabric group {fabric_group!r} like the "
                          f"rest of the cluster.")
    return nodes


def _lock_automatic(order, count: int, fabric_group: str | None) -> list[Node]:
    if count == 1 and fabric_group is None:
        nodes = list(_ready(order.sku).select_for_update(skip_locked=True).order_by("hostname")[:1])
        if nodes:
            return nodes
    else:
        for group in _groups_that_fit(order.sku, count, fabric_group):
            nodes = list(_ready(order.sku).filter(fabric_group=group)
                         .select_for_update(skip_locked=True).order_by("hostname")[:count])
            if len(nodes) == count:
                return nodes
    ready = _ready(order.sku).count()
    note = _group_note(order, count, fabric_group) if count > 1 or fabric_group else ""
    if ready >= count and not _groups_that_fit(order.sku, count, fabric_group) and note:
        raise OutOfStock(note)
    raise OutOfStock(_shortage(order, count=count, ready=ready))


def nodes_reserve(*, order, by=None, node_ids=None, count: int | None = None,
                  fabric_group: str | None = None) -> list[Node]:
    """Reserves ``count`` (default: the order's node count) ready nodes for ``order``: all in one
    fabric group, all in this transaction, or none (OutOfStock / DomainError)."""
    if not transaction.get_connection().in_atomic_block:
        raise RuntimeError("nodes_reserve must run inside transaction.atomic()")
    count = count or order.node_count
    if node_ids:
        nodes = _lock_chosen(order, node_ids, count, fabric_group)
    else:
        nodes = _lock_automatic(order, count, fabric_group)
    until = timezone.now() + timedelta(minutes=settings.PROVISIONING_RESERVATION_MINUTES)
    for node in nodes:
        node_transition(node=node, name="reserve", by=by, event_order=order,
                        note=f"for order {order.reference}", order_id=order.pk,
                        reserved_until=until)
    return nodes


def reservations_expire(*, now=None) -> list[str]:
    """Gives back nodes reserved for orders that did not move on; returns the order references."""
    now = now or timezone.now()
    expired = []
    stale = (Node.objects.filter(state=NodeState.RESERVED, reserved_until__lt=now)
             .values_list("order_id", flat=True).distinct())
    for order_id in list(stale):
        with transaction.atomic():
            order = Order.objects.select_for_update().filter(pk=order_id).first() if order_id else None
            nodes = Node.objects.select_for_update().filter(
                state=NodeState.RESERVED, reserved_until__lt=now, order_id=order_id)
            for node in nodes:
                node_transition(node=node, name="unreserve", event_order=order, order_id=None,
                                reserved_until=None,
                                note="reservation expired: provisioning did not start in time")
            if order is not None and order.state == OrderState.APPROVED:
                runs_cancel(order=order, reason="reservation expired before provisioning started")
                order_transition(order=order, name="expire_reservation",
                                 note="The reserved nodes went back to stock because provisioning "
                                      "did not start in time; approve again.")
                expired.append(order.reference)
    return expired
