"""The pipeline under the faults of a real data centre, with real worker processes, PostgreSQL
and Redis: a lease connection that drops, database backends terminated mid-batch, a staff retry
after the deadline window, termination while a node still deploys, and Redis down while staff
approve. The simulated node's journal shows what happened on each node, across processes."""

import json
import os
import socket
import subprocess
import sys
import threading
import time
from datetime import timedelta

import pytest
from django.conf import settings as django_settings
from django.db import connection
from django.utils import timezone

from portal.orders.models import Order
from provisioning.drivers.simulated import journal_completed as completed
from provisioning.drivers.simulated import journal_overlaps as overlaps
from provisioning.drivers.simulated import read_journal
from provisioning.fulfilment.approvals import order_approve
from provisioning.fulfilment.orders import order_request_termination
from provisioning.models import Node, StepRun
from provisioning.pipeline import services as pipeline_services
from provisioning.tasks import sweep_task
from tests.conftest import REPO_ROOT, worker_env
from tests.factories import H100_SKU, approved_order, make_node, submitted_order
from tests.provisioning import test_fault_injection
from tests.provisioning.test_fault_injection import LEASE_S
from tests.provisioning.test_tasks_worker import wait_for

pytestmark = [pytest.mark.celery_worker, pytest.mark.usefixtures("require_postgres")]
workers = test_fault_injection.workers  # two real worker processes on a queue of their own

SLOW = {"power": 0, "run": 0, "health": 0}


def _state(order) -> str:
    return Order.objects.values_list("state", flat=True).get(pk=order.pk)


@pytest.fixture(autouse=True)
def worker_lease(settings):
    """The sweeper runs here: it must know the workers' lease to see when one lapsed."""
    settings.PROVISIONING_STEP_LEASE_S = LEASE_S


def _sweeping(until, *, timeout: float, what: str, workers):
    """Waits for ``until()``, running the sweeper (beat's job) meanwhile."""
    def swept():
        sweep_task()
        return until()
    wait_for(swept, timeout=timeout, what=what, worker=workers)


def _terminate_backends(where: str) -> int:
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = "
                       f"current_database() AND pid <> pg_backend_pid() AND {where}")
        return len(cursor.fetchall())


def _deploy_started(node, sim_dir) -> bool:
    return any(e["name"] == "deploy_os" and e["event"] == "start"
               for e in read_journal(node.hostname, sim_dir))


def test_a_dropped_lease_connection_does_not_let_a_second_worker_run_the_step(
        workers, catalog, people, sim_dir):
    node = make_node(sku=H100_SKU, state_dir=sim_dir, delay_scale=1,
                     delays={"deploy_os": 15, **SLOW})
    workers.start("one")
    workers.start("two")
    order = approved_order(people)
    wait_for(lambda: _deploy_started(node, sim_dir), timeout=45, what="deploy_os to start",
             worker=workers)
    # Only the lease thread's backend: the one whose last statement renewed a lease.
    lease_backend = "query LIKE 'UPDATE \"provisioning_steprun\" SET \"lease_expires_at\"%'"
    wait_for(lambda: _terminate_backends(lease_backend) > 0, timeout=10,
             what="the lease thread's backend", worker=workers)
    _sweeping(lambda: _state(order) == "active", timeout=90, what="the order to become active",
              workers=workers)
    journal = read_journal(node.hostname, sim_dir)
    assert overlaps(journal) == []
    assert completed(journal).get("deploy_os") == 1
    assert [e["event"] for e in journal if e["name"] == "deploy_os"] == ["start", "ok"]


def test_terminating_every_worker_backend_mid_batch_is_not_a_failure(workers, catalog, people,
                                                                     sim_dir):
    nodes = [make_node(sku=H100_SKU, state_dir=sim_dir, delay_scale=1,
                       delays={"deploy_os": 2, "run": 0.5, "power": 0, "health": 0})
             for _ in range(4)]
    workers.start("one")
    workers.start("two")
    orders = [approved_order(people) for _ in nodes]
    wait_for(lambda: any(_deploy_started(n, sim_dir) for n in nodes), timeout=45,
             what="a deploy to start", worker=workers)
    for _ in range(3):  # a PostgreSQL failover, three times over
        time.sleep(1.5)
        _terminate_backends("backend_type = 'client backend'")

    def settled():
        return all(_state(o) in ("active", "provision_failed") for o in orders)

    _sweeping(settled, timeout=150, what="every order to settle", workers=workers)
    assert [_state(o) for o in orders] == ["active"] * len(orders), [
        (s.step, s.error) for s in StepRun.objects.filter(status="failed")]
    for node in nodes:
        assert overlaps(read_journal(node.hostname, sim_dir)) == []


def test_a_staff_retry_after_the_deadline_window_completes(workers, catalog, people, sim_dir,
                                                          settings):
    settings.PROVISIONING_STEP_DEADLINES_S = {"deploy_os": 20}  # what the sweeper applies
    node = make_node(sku=H100_SKU, state_dir=sim_dir,
                     fail={"deploy_os": {"permanent": "PXE boot refused by BMC"}})
    workers.start("one")
    order = approved_order(people)
    wait_for(lambda: _state(order) == "provision_failed", timeout=45, what="the order to fail",
             worker=workers)
    # The operator fixed the BMC; staff retry a day later (long after the first execution).
    StepRun.objects.filter(step="deploy_os").update(
        started_at=timezone.now() - timedelta(days=1))
    Node.objects.filter(pk=node.pk).update(driver_options={
        "state_dir": str(sim_dir), "delay_scale": 1, "delays": {"deploy_os": 3, **SLOW}})
    pipeline_services.run_retry_step(run=order.runs.get(), by=people.sam)
    _sweeping(lambda: _state(order) in ("active", "provision_failed"), timeout=60,
              what="the retried order to settle", workers=workers)
    step = StepRun.objects.get(step="deploy_os")
    assert (_state(order), step.status, step.error) == ("active", "succeeded", "")


def test_terminating_a_failed_cluster_waits_for_the_node_still_deploying(
        workers, catalog, people, sim_dir):
    # The broken node fails after a 4 s deploy, so the slow node's deploy has surely started
    # (a failure at once could beat the other deploy's start and stop it from ever starting).
    broken = make_node(sku=H100_SKU, state_dir=sim_dir, fabric_group="fg", hostname="gpu-broken",
                       delay_scale=1, delays={"deploy_os": 4, **SLOW},
                       fail={"configure": {"permanent": "disk not found"}})
    slow = make_node(sku=H100_SKU, state_dir=sim_dir, fabric_group="fg", hostname="gpu-slow",
                     delay_scale=1, delays={"deploy_os": 12, **SLOW})
    workers.start("one")
    workers.start("two")
    order = approved_order(people, node_count=2)
    wait_for(lambda: _state(order) == "provision_failed" and _deploy_started(slow, sim_dir),
             timeout=45, what="one node failed while the other deploys", worker=workers)
    order_request_termination(order=order, by=people.alice)
    # The next order gets the slow node as soon as it is back in stock.
    wait_for(lambda: Node.objects.get(pk=slow.pk).state == "ready", timeout=60,
             what="the node back in stock", worker=workers)
    second = order_approve(order=submitted_order(people), by=people.sam, node_ids=[slow.pk])
    _sweeping(lambda: _state(order) == "terminated" and _state(second) == "active", timeout=90,
              what="termination and the next order", workers=workers)
    journal = read_journal(slow.hostname, sim_dir)
    assert overlaps(journal) == []
    ends = [i for i, e in enumerate(journal) if e["name"] == "deploy_os" and e["event"] != "start"]
    wipes = [i for i, e in enumerate(journal) if e["name"] == "sanitise" and e["event"] == "start"]
    assert ends and wipes and min(wipes) > ends[0], journal  # no wipe before the deploy stopped
    assert overlaps(read_journal(broken.hostname, sim_dir)) == []
    stopped = StepRun.objects.get(run__kind="provision", run__order=order, node=slow,
                                  step="deploy_os")
    assert stopped.status == "failed" and stopped.error.startswith("stopped:")


class CountingPort(threading.Thread):
    """A port where Redis should be: counts connection attempts and drops each at once."""

    def __init__(self):
        super().__init__(daemon=True)
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.port = self.sock.getsockname()[1]
        self.attempts = 0

    def run(self):
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.attempts += 1
            conn.close()

    def close(self):
        self.sock.close()


APPROVE = """
import json, django
django.setup()
from portal.accounts.models import User
from portal.orders.models import Order
from provisioning.fulfilment.approvals import order_approve
order = order_approve(order=Order.objects.get(pk={order}), by=User.objects.get(pk={staff}))
print(json.dumps({{"state": order.state}}))
"""


def test_an_approval_with_redis_down_returns_at_once_and_the_sweeper_starts_it_later(
        workers, catalog, people, sim_dir):
    make_node(sku=H100_SKU, state_dir=sim_dir)
    order = submitted_order(people)
    down = CountingPort()
    down.start()
    env = {**os.environ, **worker_env(connection.settings_dict, django_settings),
           "REDIS_URL": f"redis://127.0.0.1:{down.port}/5",
           "DJANGO_SETTINGS_MODULE": "portal.settings"}
    try:
        done = subprocess.run([sys.executable, "-c", APPROVE.format(order=order.pk,
                                                                   staff=people.sam.pk)],
                              cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=120)
    finally:
        down.close()
    assert done.returncode == 0, done.stderr[-3000:]
    assert json.loads(done.stdout.strip().splitlines()[-1]) == {"state": "approved"}
    # A short publish retry, not the result backend's twenty reconnects.
    assert 1 <= down.attempts <= 6, (down.attempts, done.stderr[-2000:])
    run = order.runs.get()
    assert run.status == "pending" and "could not queue" in run.queue_error
    workers.start("one")  # Redis is back (the workers use the real one)
    _sweeping(lambda: _state(order) == "active", timeout=60, what="provisioning after the outage",
              workers=workers)
