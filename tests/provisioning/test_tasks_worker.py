"""End to end through a real Celery worker process (Redis broker, the test's PostgreSQL)."""

import time

import pytest

from portal.orders.models import Order
from portal.orders.services import order_place
from provisioning.drivers.simulated import read_journal
from provisioning.fulfilment.approvals import order_approve
from provisioning.fulfilment.orders import order_submit
from provisioning.models import Node, StepRun
from tests.factories import H100_SKU, make_node, make_quote

pytestmark = [pytest.mark.celery_worker, pytest.mark.usefixtures("require_postgres")]


@pytest.fixture
def fast_retries(monkeypatch):
    """Read by the worker process at start: short backoff so retries happen within the test."""
    monkeypatch.setenv("PROVISIONING_RETRY_BASE_MS", "200")


def wait_for(predicate, *, timeout: float = 60, worker=None, what: str = ""):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.2)
    tail = worker.output()[-4000:] if worker else ""
    raise AssertionError(f"timed out waiting for {what}\n{tail}")


def _order_state(order):
    return Order.objects.values_list("state", flat=True).get(pk=order.pk)


def test_submit_approve_and_the_worker_takes_the_order_to_active(
        fast_retries, celery_worker_process, catalog, people, sim_dir):
    node = make_node(sku=H100_SKU, state_dir=sim_dir, fail={"configure": {"transient": 2}})
    quote = make_quote(people.acme, by=people.alice)
    order = order_submit(order=order_place(quote=quote, by=people.alice), by=people.alice)
    assert order.state == "pending_approval"
    order_approve(order=order, by=people.sam)
    wait_for(lambda: _order_state(order) == "active", worker=celery_worker_process,
             what="the order to become active")
    node.refresh_from_db()
    assert node.state == "active"
    configure = StepRun.objects.get(step="configure")
    assert (configure.status, configure.attempts) == ("succeeded", 3)  # two transient failures
    assert set(StepRun.objects.values_list("status", flat=True)) == {"succeeded"}
    ok = [e["name"] for e in read_journal(node.hostname, sim_dir) if e["event"] == "ok"]
    assert ok == ["power_on", "deploy_os", "configure", "stack", "access", "acceptance-checks",
                  "acceptance"]
    assert [e.to_state for e in Order.objects.get(pk=order.pk).events.all()] == [
        "draft", "submitted", "pending_approval", "approved", "provisioning", "verifying", "active"]
    output = celery_worker_process.output()
    assert "provisioning.run_start" in output and "provisioning.step" in output


def test_a_permanent_failure_in_the_worker_fails_the_order_with_a_readable_message(
        celery_worker_process, catalog, people, sim_dir):
    node = make_node(sku=H100_SKU, state_dir=sim_dir,
                     fail={"deploy_os": {"permanent": "PXE boot refused by BMC"}})
    quote = make_quote(people.acme, by=people.alice)
    order = order_submit(order=order_place(quote=quote, by=people.alice), by=people.alice)
    order_approve(order=order, by=people.sam)
    wait_for(lambda: _order_state(order) == "provision_failed", worker=celery_worker_process,
             what="the order to fail")
    order.refresh_from_db()
    assert order.failure_reason == (f"Deploy OS failed on {node.hostname}: "
                                    "deploy_os: PXE boot refused by BMC")
    assert Node.objects.get(pk=node.pk).state == "failed_deploy"
    step = StepRun.objects.get(step="deploy_os")
    assert (step.status, step.attempts) == ("failed", 1)
