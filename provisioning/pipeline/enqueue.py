"""Queues work for the workers after the surrounding transaction commits. Services call this;
tasks never import it (they queue with ``provisioning.tasks.enqueue_steps`` directly), so
services → enqueue → tasks → runs/pipeline is one way.

A broker outage must not hold the request: publishing gives up after a short retry
(``CELERY_TASK_PUBLISH_RETRY_POLICY``; no result backend is touched, results are ignored), the
failure is recorded on the run (``queue_error``) and the sweeper queues the work again."""

from __future__ import annotations

import logging

from django.db import transaction

from provisioning import tasks
from provisioning.models import ProvisioningRun
from provisioning.pipeline.runs import StepKey

logger = logging.getLogger(__name__)


def _send(what: str, send, *, run_ids) -> None:
    """A broker outage must not turn a committed change into an error page: the failure is
    recorded on the run, and the sweeper (beat) queues whatever was left behind."""
    try:
        send()
    except Exception as exc:
        logger.exception("could not queue %s; the sweeper will pick it up", what)
        reason = f"could not queue {what}: {type(exc).__name__}: {exc}"[:500]
        ProvisioningRun.objects.filter(pk__in=list(run_ids)).update(queue_error=reason)


def enqueue_retention_key(order_id: int) -> None:
    """A read-only key for a retained bucket; a broker outage is logged and the customer's
    page says the key is still being issued, so asking again queues it again."""
    def send():
        try:
            tasks.retention_key_task.delay(order_id)
        except Exception:
            logger.exception("could not queue the read-only key of order %s", order_id)
    transaction.on_commit(send)


def enqueue_run_start(run: ProvisioningRun) -> None:
    run_id = run.pk
    transaction.on_commit(lambda: _send(f"run {run_id}", lambda: tasks.run_start_task.delay(run_id),
                                        run_ids=[run_id]))


def enqueue_steps(keys: list[StepKey]) -> None:
    keys = list(keys)
    transaction.on_commit(lambda: _send(f"steps {keys}", lambda: tasks.enqueue_steps(keys),
                                        run_ids={k[0] for k in keys}))


def enqueue_baseline_record(node, by, note: str) -> None:
    """After commit: record the node's clean baseline through its driver (a worker)."""
    node_id, by_id = node.pk, getattr(by, "pk", None)

    def send():
        try:
            tasks.baseline_record_task.delay(node_id, by_id, note)
        except Exception:
            logger.exception("could not queue the baseline of node %s", node_id)
    transaction.on_commit(send)


def enqueue_node_accept_check(node, by) -> None:
    """After commit: check the node through its driver and accept it if it passes. A broker
    outage leaves the node enrolled (not stock); the operator asks again from its page."""
    node_id, by_id = node.pk, getattr(by, "pk", None)

    def send():
        try:
            tasks.node_accept_check_task.delay(node_id, by_id)
        except Exception:
            logger.exception("could not queue the acceptance check of node %s", node_id)
    transaction.on_commit(send)


def enqueue_node_power(node, by, action: str) -> None:
    """After commit: an operator's power action through the node's driver (a worker). A broker
    outage is logged; the node's history shows the request without an outcome, and the operator
    asks again."""
    node_id, by_id = node.pk, getattr(by, "pk", None)

    def send():
        try:
            tasks.node_power_task.delay(node_id, by_id, action)
        except Exception:
            logger.exception("could not queue power %s of node %s", action, node_id)
    transaction.on_commit(send)
