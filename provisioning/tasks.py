"""Thin Celery tasks: take ids, call a service, queue what comes next. Safe to deliver twice.

Services queue work through ``provisioning.pipeline.enqueue`` (after commit); nothing here imports it.
A database error that escapes a service (the engine handles those inside a step) retries the
task with backoff (``DB_RETRY``). Results are never stored (``CELERY_TASK_IGNORE_RESULT``)."""

from __future__ import annotations

import logging

from celery import shared_task
from django.contrib.auth import get_user_model
from django.db import InterfaceError, OperationalError
from django.utils import timezone

from portal.core.retention import RETENTION_TASK_OPTIONS
from provisioning.drivers import DriverError, driver_for
from provisioning.inventory.baseline import baseline_record
from provisioning.inventory.node_power import node_power_apply
from provisioning.models import Node
from provisioning.monitoring.health import CHECK_WAITING_STATES, node_accept_if_healthy, node_health_check
from provisioning.pipeline.engine import step_deadline_s, step_execute
from provisioning.pipeline.runs import run_start
from provisioning.pipeline.sweeper import sweep
from provisioning.retention import health_retention, node_alerts_prune, step_logs_prune
from provisioning.states import NodeState
from provisioning.storage.services import buckets_delete_expired, retention_key_issue

logger = logging.getLogger(__name__)


# Database blips retry the task: closed connections are reopened by the next delivery.
DB_RETRY = {"autoretry_for": (OperationalError, InterfaceError), "retry_backoff": 1,
            "retry_backoff_max": 60, "retry_jitter": True}

# Room for a step that hit its soft limit to record the transient outcome before the hard kill.
STEP_HARD_LIMIT_MARGIN_S = 300


def step_time_limits(step: str) -> dict[str, int]:
    """Celery time limits for one delivery of ``step``: the soft limit is the step's deadline
    (settings PROVISIONING_STEP_DEADLINE_S / PROVISIONING_STEP_DEADLINES_S), so a long step
    (deploy_os, wipe) is not cut off by the global CELERY_TASK_SOFT_TIME_LIMIT. A retry
    (``self.retry``) carries the limits of the delivery it retries."""
    deadline = step_deadline_s(step)
    return {"soft_time_limit": deadline, "time_limit": deadline + STEP_HARD_LIMIT_MARGIN_S}


def enqueue_steps(keys) -> None:
    """Sends one step task per (run_id, node_id, step) key, now."""
    for run_id, node_id, step in keys:
        step_task.apply_async((run_id, node_id, step), **step_time_limits(step))


@shared_task(name="provisioning.run_start", acks_late=True, max_retries=10, **DB_RETRY)
def run_start_task(run_id: int) -> int:
    keys = run_start(run_id=run_id)
    enqueue_steps(keys)
    return len(keys)


@shared_task(bind=True, name="provisioning.step", acks_late=True, max_retries=None, **DB_RETRY)
def step_task(self, run_id: int, node_id: int, step: str) -> str:
    outcome = step_execute(run_id=run_id, node_id=node_id, step=step)
    enqueue_steps(outcome.next_steps)
    if outcome.retry_in_s is not None:
        raise self.retry(countdown=outcome.retry_in_s)
    return outcome.status


@shared_task(name="provisioning.sweep", acks_late=True, max_retries=3, **DB_RETRY)
def sweep_task() -> dict:
    result = sweep()
    enqueue_steps(result.requeue)
    for run_id in result.unstarted:
        run_start_task.delay(run_id)
    return result.summary()


@shared_task(name="provisioning.health_all")
def health_all_task() -> int:
    ids = list(Node.objects.filter(state=NodeState.ACTIVE).values_list("pk", flat=True))
    for node_id in ids:
        health_check_task.delay(node_id)
    return len(ids)


@shared_task(name="provisioning.health_check", acks_late=True)
def health_check_task(node_id: int) -> bool | None:
    node = Node.objects.filter(pk=node_id).first()
    if node is None:
        return None
    return node_health_check(node=node).ok


@shared_task(name="provisioning.storage_delete_expired", acks_late=True)
def storage_delete_expired_task() -> dict:
    """Beat: deletes retained buckets whose date has passed (never one before its date)."""
    report = buckets_delete_expired(log=logger.info)
    return {"deleted": list(report.deleted), "failed": list(report.failed)}


@shared_task(name="provisioning.retention_key", acks_late=True, autoretry_for=(DriverError,),
             max_retries=5, retry_backoff=5, retry_backoff_max=300, retry_jitter=True)
def retention_key_task(order_id: int) -> bool:
    """A read-only key for a terminated order's retained bucket (transient provider errors
    retry; a permanent one is kept on the bucket for staff)."""
    return retention_key_issue(order_id=order_id) is not None


@shared_task(name="provisioning.baseline_record", acks_late=True, autoretry_for=(DriverError,),
             max_retries=3, retry_backoff=5)
def baseline_record_task(node_id: int, by_id: int | None, note: str) -> int | None:
    """Records a node's clean baseline on an operator's word (a node that had none)."""
    node = Node.objects.filter(pk=node_id, baseline_at__isnull=True).first()
    if node is None:
        return None  # recorded meanwhile: a redelivered task is harmless
    by = get_user_model().objects.filter(pk=by_id).first() if by_id else None
    entries = baseline_record(node=node, driver=driver_for(node),
                              note=f"clean baseline recorded on {by or 'an operator'}'s word"
                                   + (f": {note}" if note else ""))
    return len(entries)


@shared_task(name="provisioning.node_accept_check", acks_late=True)
def node_accept_check_task(node_id: int, by_id: int | None) -> bool | None:
    """Checks an enrolled node (or one in maintenance) through its driver; it becomes ready only
    if the check passes."""
    node = Node.objects.filter(pk=node_id, state__in=CHECK_WAITING_STATES).first()
    if node is None:
        return None  # gone, or no longer waiting: a redelivered task is harmless
    by = get_user_model().objects.filter(pk=by_id).first() if by_id else None
    return node_accept_if_healthy(node=node, by=by).ok


@shared_task(name="provisioning.retention_health_checks", **RETENTION_TASK_OPTIONS)
def retention_health_checks_task() -> dict:
    """Beat: summarises each day of health checks per node, then deletes checks past their
    window (HEALTH_CHECK_RETENTION_DAYS) and summaries past theirs."""
    return health_retention(now=timezone.now())


@shared_task(name="provisioning.retention_step_logs", **RETENTION_TASK_OPTIONS)
def retention_step_logs_task() -> dict:
    """Beat: log lines of runs finished longer ago than STEP_LOG_RETENTION_DAYS."""
    return dict(step_logs_prune(now=timezone.now()))


@shared_task(name="provisioning.retention_node_alerts", **RETENTION_TASK_OPTIONS)
def retention_node_alerts_task() -> dict:
    """Beat: monitoring alerts resolved longer ago than NODE_ALERT_RETENTION_DAYS."""
    return dict(node_alerts_prune(now=timezone.now()))


@shared_task(name="provisioning.inventory.node_power", acks_late=True)
def node_power_task(node_id: int, by_id: int | None, action: str) -> bool | None:
    """An operator's power action on a node. Not retried by itself: a failure is recorded in the
    node's history and the operator decides (a second cycle of a node that came back would hurt).
    A redelivery repeats it, which on, off and a cycle of a hung node survive."""
    node = Node.objects.filter(pk=node_id).select_related("sku__gpu").first()
    if node is None:
        return None
    by = get_user_model().objects.filter(pk=by_id).first() if by_id else None
    return node_power_apply(node=node, by=by, action=action)
