"""Races on PostgreSQL with real threads, each on its own database connection."""

import threading
import uuid

import pytest
from django.db import DatabaseError, connection, transaction

from portal.core.states import DomainError, TransitionNotAllowed
from portal.orders.models import Order
from portal.orders.services import order_place
from portal.orders.states import OrderState
from provisioning.fulfilment.approvals import order_approve
from provisioning.fulfilment.orders import order_submit
from provisioning.inventory.allocation import OutOfStock
from provisioning.models import Node, ProvisioningRun
from provisioning.pipeline import runs
from tests.factories import H100_SKU, make_node, make_quote
from tests.pg import wait_until_blocked

pytestmark = pytest.mark.usefixtures("require_postgres")


@pytest.fixture
def discard_queue():
    """Tasks queued on commit go to a throwaway queue that is purged afterwards."""
    from portal.celery import app

    old = app.conf.task_default_queue
    name = f"test-discard-{uuid.uuid4().hex[:8]}"
    app.conf.task_default_queue = name
    yield name
    app.conf.task_default_queue = old
    with app.connection_for_write() as conn:
        try:
            conn.default_channel.queue_purge(name)
        except Exception:  # nothing was queued: the queue does not exist
            pass


def _race(*calls):
    """Runs the calls at the same moment in threads; returns what each returned or raised."""
    barrier = threading.Barrier(len(calls))
    results: list = [None] * len(calls)

    def worker(i, call):
        try:
            barrier.wait()
            results[i] = call()
        except Exception as exc:
            results[i] = exc
        finally:
            connection.close()

    threads = [threading.Thread(target=worker, args=(i, c)) for i, c in enumerate(calls)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    return results


def _pending(people):
    quote = make_quote(people.acme, by=people.alice)
    return order_submit(order=order_place(quote=quote, by=people.alice), by=people.alice)


@pytest.mark.parametrize("attempt", range(3))
def test_two_staff_approving_the_same_order_exactly_one_wins(
        transactional_db, catalog, people, sim_dir, discard_queue, attempt):
    make_node(sku=H100_SKU, state_dir=sim_dir)
    make_node(sku=H100_SKU, state_dir=sim_dir)
    order = _pending(people)
    second = type(people.sam).objects.create(username="sam2", staff_role="approver")
    results = _race(lambda: order_approve(order=Order.objects.get(pk=order.pk), by=people.sam),
                    lambda: order_approve(order=Order.objects.get(pk=order.pk), by=second))
    winners = [r for r in results if isinstance(r, Order)]
    losers = [r for r in results if isinstance(r, Exception)]
    assert len(winners) == 1 and len(losers) == 1, results
    assert isinstance(losers[0], TransitionNotAllowed)
    assert str(losers[0]) == f"Cannot approve order {order.reference}: it is already approved."
    order.refresh_from_db()
    assert order.state == OrderState.APPROVED
    assert order.events.filter(to_state="approved").count() == 1
    assert Node.objects.filter(order=order).count() == 1  # the loser reserved nothing
    assert ProvisioningRun.objects.filter(order=order).count() == 1


@pytest.mark.parametrize("attempt", range(3))
def test_two_orders_racing_for_the_last_node_exactly_one_wins(
        transactional_db, catalog, people, sim_dir, discard_queue, attempt):
    node = make_node(sku=H100_SKU, state_dir=sim_dir)
    first, second = _pending(people), _pending(people)
    results = _race(lambda: order_approve(order=first, by=people.sam),
                    lambda: order_approve(order=second, by=people.sam))
    winners = [r for r in results if isinstance(r, Order)]
    losers = [r for r in results if isinstance(r, Exception)]
    assert len(winners) == 1 and len(losers) == 1, results
    assert isinstance(losers[0], OutOfStock) and isinstance(losers[0], DomainError)
    assert "8× H100 SXM5 80GB" in str(losers[0]) and "this order needs 1" in str(losers[0])
    node.refresh_from_db()
    assert node.state == "reserved" and node.order_id == winners[0].pk
    loser = Order.objects.exclude(pk=winners[0].pk).get(pk__in=[first.pk, second.pk])
    assert loser.state == OrderState.PENDING_APPROVAL
    assert not ProvisioningRun.objects.filter(order=loser).exists()


def test_clusters_racing_for_one_fabric_group_never_share_or_split_it(
        transactional_db, catalog, people, sim_dir, discard_queue):
    group = [make_node(sku=H100_SKU, state_dir=sim_dir, fabric_group="f1") for _ in range(3)]
    orders = []
    for _ in range(2):
        quote = make_quote(people.acme, by=people.alice, node_count=2)
        orders.append(order_submit(order=order_place(quote=quote, by=people.alice), by=people.alice))
    results = _race(*[lambda o=o: order_approve(order=o, by=people.sam) for o in orders])
    winners = [r for r in results if isinstance(r, Order)]
    assert len(winners) == 1, results
    assert isinstance([r for r in results if isinstance(r, Exception)][0], OutOfStock)
    taken = Node.objects.filter(pk__in=[n.pk for n in group], state="reserved")
    assert taken.count() == 2 and {n.order_id for n in taken} == {winners[0].pk}




def test_run_start_locks_the_order_before_the_run(transactional_db, catalog, people, sim_dir,
                                                  discard_queue):
    """order_cancel and reservations_expire lock the order, then the run: run_start must take
    them in the same order, or the two deadlock."""
    make_node(sku=H100_SKU, state_dir=sim_dir)
    order = order_approve(order=_pending(people), by=people.sam)
    run = order.runs.get()
    order_locked, release, started = threading.Event(), threading.Event(), threading.Event()
    backend: dict = {}
    result: dict = {}

    def hold_the_order():  # what order_cancel / reservations_expire do first
        try:
            with transaction.atomic():
                Order.objects.select_for_update().get(pk=order.pk)
                order_locked.set()
                release.wait(30)
        finally:
            connection.close()

    def start_the_run():
        try:
            with connection.cursor() as cursor:
                cursor.execute("SELECT pg_backend_pid()")
                backend["pid"] = cursor.fetchone()[0]
            started.set()
            result["keys"] = runs.run_start(run_id=run.pk)
        except Exception as exc:
            result["error"] = exc
        finally:
            connection.close()

    holder = threading.Thread(target=hold_the_order)
    holder.start()
    assert order_locked.wait(30)
    starter = threading.Thread(target=start_the_run)
    starter.start()
    try:
        assert started.wait(30)
        wait_until_blocked(lambda: backend["pid"], "run_start")
        try:  # the next move of order_cancel: the run's row. It must not be held by run_start.
            with transaction.atomic():
                ProvisioningRun.objects.select_for_update(nowait=True).get(pk=run.pk)
            run_free = True
        except DatabaseError:
            run_free = False
    finally:
        release.set()
        holder.join(30)
        starter.join(30)
    assert run_free, "run_start held the run while it waited for the order"
    assert "error" not in result, result
    assert result["keys"] and ProvisioningRun.objects.get(pk=run.pk).status == "running"
