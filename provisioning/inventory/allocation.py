"""Which nodes an order gets. Takes rows with SELECT … FOR UPDATE SKIP LOCKED on PostgreSQL, so
two approvals racing for stock never take the same node and never wait on each other."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import Count, F, Q, Window
from django.db.models.functions import RowNumber
from django.utils import timezone

from portal.core.states import DomainError
from portal.orders.models import Order
from portal.orders.states import OrderState
from portal.orders.transitions import order_transition
from provisioning.models import Node
from provisioning.pipeline.runs import runs_cancel
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
    return Node.objects.ready().filter(sku=sku)


def _shortage(order, *, count: int, ready: int, group_note: str = "") -> str:
    sku = order.sku.name
    if ready == 0:
        return f"No ready node of {sku} is in stock; this order needs {count}."
    if ready < count:
        word = "node" if ready == 1 else "nodes"
        return f"Only {ready} ready {word} of {sku}; this order needs {count}."
    return group_note or (f"{ready} ready nodes of {sku} are being reserved by other orders "
                          f"right now; this order needs {count}. Try again in a moment.")


@dataclass(frozen=True)
class ReadyStock:
    """The ready nodes of one SKU: how many, and how many in each fabric group ("" for none)."""

    total: int = 0
    groups: dict[str, int] = field(default_factory=dict)

    def fitting_groups(self, count: int, fabric_group: str | None) -> list[str]:
        """Groups holding ``count`` ready nodes, smallest first (big groups stay free for big
        orders); only ``fabric_group`` when given (a replacement joins its cluster's group)."""
        groups = sorted((n, g) for g, n in self.groups.items() if g and n >= count)
        return [g for _, g in groups if fabric_group is None or g == fabric_group]

    def largest_group(self) -> int:
        return max((n for g, n in self.groups.items() if g), default=0)


def ready_stock(sku_ids=None) -> dict[int, ReadyStock]:
    """Ready nodes per SKU of ``sku_ids`` (None: every SKU with some) and per fabric group, in one
    query."""
    ready = Node.objects.ready() if sku_ids is None else Node.objects.ready().filter(sku_id__in=list(sku_ids))
    rows = ready.values_list("sku_id", "fabric_group").annotate(n=Count("pk")).order_by()
    stock: dict[int, ReadyStock] = {}
    for sku_id, group, n in rows:
        entry = stock.get(sku_id, ReadyStock())
        stock[sku_id] = ReadyStock(total=entry.total + n, groups={**entry.groups, group: n})
    return stock


def _groups_that_fit(sku, count: int, fabric_group: str | None) -> list[str]:
    return ready_stock([sku.pk]).get(sku.pk, ReadyStock()).fitting_groups(count, fabric_group)


def _group_note(order, count: int, fabric_group: str | None,
                stock: ReadyStock | None = None) -> str:
    if fabric_group is not None:
        return (f"Fabric group {fabric_group!r} has fewer than {count} ready nodes of "
                f"{order.sku.name}; the nodes of a cluster must share one fabric.")
    if stock is None:
        stock = ready_stock([order.sku_id]).get(order.sku_id, ReadyStock())
    return (f"No fabric group has {count} ready nodes of {order.sku.name} together "
            f"(largest: {stock.largest_group()}); the nodes of a cluster must share one "
            f"fabric.")


def nodes_suggest(*, order, count: int | None = None, fabric_group: str | None = None) -> Pick:
    """What ``nodes_reserve`` would take now, without locking anything (for the approval page)."""
    return nodes_suggest_many([order], count=count, fabric_group=fabric_group)[order.pk]


def nodes_suggest_many(orders, *, count: int | None = None,
                       fabric_group: str | None = None) -> dict[int, Pick]:
    """``nodes_suggest`` for each of ``orders`` (a page of the approval queue) in at most three
    queries whatever the number of orders or nodes: the ready stock per SKU and fabric group,
    the first ready node of each SKU (single-node orders), the first nodes of each chosen
    group (clusters). Orders of one SKU are suggested the same nodes: nothing is reserved."""
    stock = ready_stock({o.sku_id for o in orders})
    wants: dict[int, tuple[int, str | None]] = {}  # order → (count, its group; None: any node)
    for order in orders:
        needed = count or order.node_count
        sku_stock = stock.get(order.sku_id, ReadyStock())
        if needed == 1 and fabric_group is None:
            wants[order.pk] = (needed, None if sku_stock.total else "")
        else:
            groups = sku_stock.fitting_groups(needed, fabric_group)
            wants[order.pk] = (needed, groups[0] if groups else "")
    singles = _first_ready({o.sku_id for o in orders if wants[o.pk][1] is None})
    clusters = _first_ready_in_groups({(o.sku_id, wants[o.pk][1]) for o in orders if wants[o.pk][1]},
                                      most=max((n for n, g in wants.values() if g), default=0))
    picks = {}
    for order in orders:
        needed, group = wants[order.pk]
        sku_stock = stock.get(order.sku_id, ReadyStock())
        nodes = (singles.get(order.sku_id, ()) if group is None
                 else tuple(clusters.get((order.sku_id, group), ())[:needed]))
        if len(nodes) == needed:
            picks[order.pk] = Pick(nodes=nodes, ready_total=sku_stock.total)
            continue
        note = (_group_note(order, needed, fabric_group, sku_stock)
                if sku_stock.total >= needed else "")
        picks[order.pk] = Pick(nodes=(), ready_total=sku_stock.total, problem=_shortage(
            order, count=needed, ready=sku_stock.total, group_note=note))
    return picks


def _first_ready(sku_ids) -> dict[int, tuple[Node]]:
    """The ready node of each SKU that a single-node order takes (the first by hostname)."""
    if not sku_ids:
        return {}
    rows = (Node.objects.ready().filter(sku_id__in=list(sku_ids))
            .annotate(rank=Window(RowNumber(), partition_by=[F("sku_id")],
                                  order_by=[F("hostname").asc()]))
            .filter(rank=1))
    return {node.sku_id: (node,) for node in rows}


def _first_ready_in_groups(wanted: set[tuple[int, str]], *,
                           most: int) -> dict[tuple[int, str], list[Node]]:
    """The first ``most`` ready nodes by hostname of each (SKU, fabric group) in ``wanted``."""
    if not wanted:
        return {}
    where = Q()
    for sku_id, group in wanted:
        where |= Q(sku_id=sku_id, fabric_group=group)
    rows = (Node.objects.ready().filter(where)
            .annotate(rank=Window(RowNumber(), partition_by=[F("sku_id"), F("fabric_group")],
                                  order_by=[F("hostname").asc()]))
            .filter(rank__lte=most).order_by("sku_id", "fabric_group", "hostname"))
    found: dict[tuple[int, str], list[Node]] = {}
    for node in rows:
        found.setdefault((node.sku_id, node.fabric_group), []).append(node)
    return found


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
