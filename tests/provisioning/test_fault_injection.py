"""A worker killed with SIGKILL in the middle of a step: the task comes back, the run completes,
and no step's side effect happens twice.

The simulated node's journal counts side effects across processes: an operation writes "start"
when it begins and "ok" when it completes.
"""

import os
import signal
import subprocess
import sys
import time
import uuid
from collections import Counter

import pytest
from django.db import connection

from portal.celery import app
from portal.orders.models import Order
from portal.orders.services import order_place
from provisioning.drivers.simulated import read_journal
from provisioning.fulfilment.approvals import order_approve
from provisioning.fulfilment.orders import order_submit
from provisioning.models import NodeEvent, StepRun
from tests.conftest import REPO_ROOT, wait_for_worker, worker_env
from tests.factories import H100_SKU, make_node, make_quote
from tests.provisioning.test_tasks_worker import wait_for

pytestmark = [pytest.mark.celery_worker, pytest.mark.usefixtures("require_postgres")]

VISIBILITY_TIMEOUT_S = 4  # Redis gives an unacknowledged message back after this
LEASE_S = 3  # a dead worker's claim on a step lapses after this


class Workers:
    def __init__(self, settings, tmp_path):
        self.queue = f"test-{uuid.uuid4().hex[:10]}"
        self.env = os.environ.copy()
        self.env.update(worker_env(connection.settings_dict, settings))
        self.env.update({"CELERY_QUEUE": self.queue,
                         "CELERY_VISIBILITY_TIMEOUT": str(VISIBILITY_TIMEOUT_S),
                         "PROVISIONING_STEP_LEASE_S": str(LEASE_S),
                         "PROVISIONING_RETRY_BASE_MS": "200"})
        self.tmp_path = tmp_path
        self.procs: list[tuple[subprocess.Popen, object]] = []

    def start(self, name: str) -> subprocess.Popen:
        log = self.tmp_path / f"{name}.log"
        proc = subprocess.Popen(
            [sys.executable, "-m", "celery", "-A", "portal", "worker", "-l", "INFO",
             "--concurrency", "1", "-Q", self.queue, "-n", f"{name}-{self.queue}@%h",
             "--without-mingle", "--without-gossip"],
            cwd=REPO_ROOT, env=self.env, stdout=log.open("w"), stderr=subprocess.STDOUT,
            start_new_session=True,  # its own process group: SIGKILL takes the pool children too
        )
        self.procs.append((proc, log))
        wait_for_worker(app, f"{name}-{self.queue}@", proc, log)
        return proc

    def output(self) -> str:
        return "\n".join(f"--- {log.name}\n{log.read_text(errors='replace')[-3000:]}"
                         for _, log in self.procs)

    def stop_all(self) -> None:
        for proc, _ in self.procs:
            if proc.poll() is None:
                proc.terminate()
                try:
                    proc.wait(timeout=20)
                except subprocess.TimeoutExpired:
                    os.killpg(proc.pid, signal.SIGKILL)


@pytest.fixture
def workers(require_redis, transactional_db, settings, tmp_path):
    handle = Workers(settings, tmp_path)
    old = app.conf.task_default_queue
    app.conf.task_default_queue = handle.queue
    yield handle
    app.conf.task_default_queue = old
    handle.stop_all()
    with app.connection_for_write() as conn:
        try:
            conn.default_channel.queue_purge(handle.queue)
        except Exception:
            pass


def _events(journal, name):
    return Counter(e["event"] for e in journal if e["name"] == name)


def test_a_worker_killed_mid_step_is_replaced_and_nothing_happens_twice(
        workers, catalog, people, sim_dir):
    node = make_node(sku=H100_SKU, state_dir=sim_dir, delay_scale=1,
                     delays={"deploy_os": 8, "power": 0, "run": 0, "health": 0})
    first = workers.start("doomed")
    quote = make_quote(people.acme, by=people.alice)
    order = order_submit(order=order_place(quote=quote, by=people.alice), by=people.alice)
    order_approve(order=order, by=people.sam)

    def deploy_started():
        return _events(read_journal(node.hostname, sim_dir), "deploy_os")["start"] == 1

    wait_for(deploy_started, timeout=45, what="deploy_os to start", worker=workers)
    time.sleep(1)  # well inside the 8 s the image takes to write
    os.killpg(first.pid, signal.SIGKILL)
    first.wait(timeout=10)

    step = StepRun.objects.get(step="deploy_os")
    assert step.status == "running" and step.attempts == 1
    assert _events(read_journal(node.hostname, sim_dir), "deploy_os")["ok"] == 0

    time.sleep(VISIBILITY_TIMEOUT_S)  # the message becomes visible again…
    workers.start("rescuer")  # …and a fresh worker takes it
    wait_for(lambda: Order.objects.get(pk=order.pk).state == "active", timeout=90,
             what="the order to become active after the kill", worker=workers)

    journal = read_journal(node.hostname, sim_dir)
    ok = Counter(e["name"] for e in journal if e["event"] == "ok")
    # The interrupted step (power on, then write the image) is done again from its start; its
    # image is written to completion once, and no other step repeats anything.
    assert ok == {"power_on": 2, "deploy_os": 1, "configure": 1, "stack": 1, "access": 1,
                  "acceptance": 1, "acceptance-checks": 1}
    assert _events(journal, "deploy_os")["start"] == 2  # interrupted once, completed once
    attempts = dict(StepRun.objects.values_list("step", "attempts"))
    assert attempts == {"reserve": 1, "deploy_os": 2, "configure": 1, "storage": 1, "stack": 1,
                        "access": 1, "acceptance": 1, "handover": 1}
    assert set(StepRun.objects.values_list("status", flat=True)) == {"succeeded"}
    transitions = Counter(NodeEvent.objects.filter(node=node).values_list("transition", flat=True))
    assert transitions == {"enrol": 1, "reserve": 1, "deploy": 1, "configure": 1, "validate": 1,
                           "activate": 1}
    order_moves = Counter(Order.objects.get(pk=order.pk).events.values_list("to_state", flat=True))
    assert all(count == 1 for count in order_moves.values()), order_moves
    assert "provisioning.step" in workers.output()
