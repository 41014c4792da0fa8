"""Retention of fulfilment's tables: health checks are summarised per node per day, then deleted
past their window (each node's newest kept); step logs go only for runs finished past theirs
(never a run in progress, nor a failed run staff can still retry); audit rows stay."""

import time
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal

import pytest
from django.conf import settings
from django.utils import timezone

from portal.orders.models import OrderEvent
from portal.orders.states import OrderState
from provisioning.models import (
    HealthCheck,
    HealthCheckDaily,
    NodeEvent,
    ProvisioningRun,
    RunEvent,
    StepLogLine,
    StepRun,
)
from provisioning.monitoring.models import NodeAlert
from provisioning.retention import health_checks_prune, health_retention, node_alerts_prune, step_logs_prune
from provisioning.states import RunKind, RunStatus, StepStatus
from provisioning.tasks import retention_health_checks_task, retention_step_logs_task
from tests.factories import H100_SKU, OrganisationFactory, make_node, make_order

NOW = datetime(2026, 3, 10, 12, 0, tzinfo=UTC)
pytestmark = pytest.mark.usefixtures("catalog")


def _check(node, at: datetime, *, ok: bool = True, gpus: int | None = 8, temperature=None,
           ecc=None) -> HealthCheck:
    check = HealthCheck.objects.create(node=node, ok=ok, gpu_count=gpus, expected_gpu_count=8,
                                       max_temperature_c=temperature, ecc_errors=ecc)
    HealthCheck.objects.filter(pk=check.pk).update(at=at)  # `at` is stamped on insert
    return check


def _summaries() -> dict:
    return {(s.node.hostname, s.day): (s.checks, s.ok_count, s.failed_count, s.unreachable_count,
                                       s.worst, s.max_temperature_c, s.max_ecc_errors, s.min_gpu_count)
            for s in HealthCheckDaily.objects.select_related("node")}


@pytest.mark.django_db
def test_a_day_of_checks_is_summarised_per_node_once(sim_dir):
    a = make_node(sku=H100_SKU, state_dir=sim_dir, hostname="gpu-a")
    b = make_node(sku=H100_SKU, state_dir=sim_dir, hostname="gpu-b")
    day = datetime(2026, 3, 8, tzinfo=UTC)
    _check(a, day + timedelta(hours=1), temperature=Decimal("70.0"))
    _check(a, day + timedelta(hours=2), ok=False, gpus=7, temperature=Decimal("88.5"), ecc=3)
    _check(a, day + timedelta(hours=23, minutes=59), ok=False, gpus=None)  # unreachable
    _check(b, day + timedelta(hours=5), ok=False, gpus=None)
    _check(b, day + timedelta(hours=6))
    _check(a, day + timedelta(days=1, hours=1))  # the next day
    _check(a, NOW - timedelta(minutes=5))  # today: not over, not summarised

    assert health_retention(now=NOW)["summarised"] == 3
    assert _summaries() == {
        ("gpu-a", date(2026, 3, 8)): (3, 1, 2, 1, "unhealthy", Decimal("88.5"), 3, 7),
        ("gpu-b", date(2026, 3, 8)): (2, 1, 1, 1, "unreachable", None, None, 8),
        ("gpu-a", date(2026, 3, 9)): (1, 1, 0, 0, "ok", None, None, 8),
    }
    assert health_retention(now=NOW)["summarised"] == 0
    assert health_retention(now=NOW + timedelta(hours=1))["summarised"] == 0
    assert HealthCheckDaily.objects.count() == 3  # nothing counted twice


@pytest.mark.django_db
def test_checks_past_the_window_go_and_each_nodes_newest_stays(sim_dir):
    busy = make_node(sku=H100_SKU, state_dir=sim_dir, hostname="gpu-busy")
    idle = make_node(sku=H100_SKU, state_dir=sim_dir, hostname="gpu-idle")  # out of service
    window = timedelta(days=settings.HEALTH_CHECK_RETENTION_DAYS)
    past = [_check(busy, NOW - window - timedelta(days=d)) for d in (3, 2, 1)]
    past.append(_check(busy, NOW - window - timedelta(minutes=1), ok=False))
    inside = _check(busy, NOW - window + timedelta(minutes=1))
    idle_old = _check(idle, NOW - window - timedelta(days=5))
    idle_last = _check(idle, NOW - window - timedelta(days=2), ok=False)

    result = health_retention(now=NOW)
    assert result["deleted"] == {"provisioning.HealthCheck": len(past) + 1}
    assert set(HealthCheck.objects.values_list("pk", flat=True)) == {inside.pk, idle_last.pk}
    assert not HealthCheck.objects.filter(pk=idle_old.pk).exists()
    # What they said stays in the day's summary.
    day = (NOW - window - timedelta(minutes=1)).date()
    assert HealthCheckDaily.objects.get(node=busy, day=day).failed_count == 1
    assert health_retention(now=NOW) == {"summarised": 0, "deleted": {}}


@pytest.mark.django_db
def test_a_check_is_deleted_only_once_its_day_is_summarised(sim_dir, settings):
    node = make_node(sku=H100_SKU, state_dir=sim_dir)
    settings.HEALTH_CHECK_RETENTION_DAYS = 1
    _check(node, NOW - timedelta(days=3))
    HealthCheckDaily.objects.create(node=node, day=(NOW - timedelta(days=5)).date(), checks=1,
                                    ok_count=1, failed_count=0, unreachable_count=0, worst="ok")
    _check(node, NOW - timedelta(hours=1))
    # Summaries exist up to 5 days ago: the 3-day-old check is summarised first, then deleted.
    result = health_retention(now=NOW)
    assert result["summarised"] == 1
    assert HealthCheckDaily.objects.filter(node=node, day=(NOW - timedelta(days=3)).date()).exists()
    assert HealthCheck.objects.count() == 1


@pytest.mark.django_db
def test_pruning_alone_never_deletes_a_check_whose_day_has_no_summary(sim_dir):
    node = make_node(sku=H100_SKU, state_dir=sim_dir)
    old = _check(node, NOW - timedelta(days=settings.HEALTH_CHECK_RETENTION_DAYS + 3))
    _check(node, NOW - timedelta(hours=1))
    assert health_checks_prune(now=NOW) == {}
    assert HealthCheck.objects.filter(pk=old.pk).exists()


@pytest.mark.django_db
def test_daily_summaries_go_after_their_own_window(sim_dir, settings):
    node = make_node(sku=H100_SKU, state_dir=sim_dir)
    settings.HEALTH_SUMMARY_RETENTION_DAYS = 10
    for days_ago in (12, 11, 10, 9):
        HealthCheckDaily.objects.create(node=node, day=(NOW - timedelta(days=days_ago)).date(),
                                        checks=1, ok_count=1, failed_count=0, unreachable_count=0,
                                        worst="ok")
    assert health_retention(now=NOW)["deleted"] == {"provisioning.HealthCheckDaily": 2}
    days = HealthCheckDaily.objects.values_list("day", flat=True)
    assert sorted((NOW.date() - day).days for day in days) == [9, 10]


@pytest.mark.django_db
def test_a_window_of_zero_keeps_every_check(sim_dir, settings):
    node = make_node(sku=H100_SKU, state_dir=sim_dir)
    settings.HEALTH_CHECK_RETENTION_DAYS = 0
    _check(node, NOW - timedelta(days=400))
    _check(node, NOW - timedelta(days=300))
    assert health_retention(now=NOW)["deleted"] == {}
    assert HealthCheck.objects.count() == 2


@pytest.mark.django_db
def test_a_batch_smaller_than_the_rows_still_deletes_them_all(sim_dir, settings):
    settings.RETENTION_BATCH_SIZE = 3
    node = make_node(sku=H100_SKU, state_dir=sim_dir)
    old = NOW - timedelta(days=settings.HEALTH_CHECK_RETENTION_DAYS + 1)
    for minutes in range(10):
        _check(node, old + timedelta(minutes=minutes))
    newest = _check(node, NOW - timedelta(hours=1))
    assert health_retention(now=NOW)["deleted"] == {"provisioning.HealthCheck": 10}
    assert list(HealthCheck.objects.values_list("pk", flat=True)) == [newest.pk]


# --- step logs --------------------------------------------------------------------------------
def _run_with_log(node, *, order_state: str, status: str, finished_ago: timedelta | None,
                  kind: str = RunKind.PROVISION, lines: int = 2) -> ProvisioningRun:
    order = make_order(OrganisationFactory(), state=order_state)
    run = ProvisioningRun.objects.create(order=order, kind=kind, status=status,
                                         finished_at=NOW - finished_ago if finished_ago else None)
    step = StepRun.objects.create(run=run, node=node, step="configure", position=2,
                                  status=StepStatus.RUNNING if status == RunStatus.RUNNING
                                  else StepStatus.SUCCEEDED)
    StepLogLine.objects.bulk_create(StepLogLine(step_run=step, at=NOW - timedelta(days=200),
                                                text=f"line {i}") for i in range(lines))
    return run


def _lines(run) -> int:
    return StepLogLine.objects.filter(step_run__run=run).count()


@pytest.mark.django_db
def test_step_logs_go_only_for_runs_finished_past_the_window(sim_dir):
    node = make_node(sku=H100_SKU, state_dir=sim_dir)
    window = timedelta(days=settings.STEP_LOG_RETENTION_DAYS)
    past = _run_with_log(node, order_state=OrderState.ACTIVE, status=RunStatus.SUCCEEDED,
                         finished_ago=window + timedelta(minutes=1))
    cancelled = _run_with_log(node, order_state=OrderState.CANCELLED, status=RunStatus.CANCELLED,
                              finished_ago=window + timedelta(days=30))
    inside = _run_with_log(node, order_state=OrderState.ACTIVE, status=RunStatus.SUCCEEDED,
                           finished_ago=window - timedelta(minutes=1))
    running = _run_with_log(node, order_state=OrderState.PROVISIONING, status=RunStatus.RUNNING,
                            finished_ago=None)
    pending = _run_with_log(node, order_state=OrderState.APPROVED, status=RunStatus.PENDING,
                            finished_ago=None)
    # A failed run staff can still retry (its order waits in provision_failed) keeps its log;
    # one whose order moved on (terminated) does not.
    retryable = _run_with_log(node, order_state=OrderState.PROVISION_FAILED, status=RunStatus.FAILED,
                              finished_ago=window + timedelta(days=60))
    abandoned = _run_with_log(node, order_state=OrderState.TERMINATED, status=RunStatus.FAILED,
                              finished_ago=window + timedelta(days=60))
    steps_before = StepRun.objects.count()

    assert step_logs_prune(now=NOW) == {"provisioning.StepLogLine": 6}
    assert {r.pk: _lines(r) for r in (past, cancelled, abandoned)} == {
        past.pk: 0, cancelled.pk: 0, abandoned.pk: 0}
    assert [_lines(r) for r in (inside, running, pending, retryable)] == [2, 2, 2, 2]
    assert StepRun.objects.count() == steps_before  # the steps and their results stay
    assert step_logs_prune(now=NOW) == {}


@pytest.mark.django_db
def test_step_logs_in_batches_smaller_than_the_log(sim_dir, settings):
    settings.RETENTION_BATCH_SIZE = 3
    node = make_node(sku=H100_SKU, state_dir=sim_dir)
    run = _run_with_log(node, order_state=OrderState.ACTIVE, status=RunStatus.SUCCEEDED,
                        finished_ago=timedelta(days=settings.STEP_LOG_RETENTION_DAYS + 1), lines=11)
    assert step_logs_prune(now=NOW) == {"provisioning.StepLogLine": 11}
    assert _lines(run) == 0


@pytest.mark.django_db
def test_audit_rows_are_never_pruned(sim_dir, settings):
    """Order, node and run transitions are the audit trail: every retention task leaves them."""
    from portal.accounts.tasks import retention_task as accounts_retention
    from portal.orders.tasks import retention_task as orders_retention
    from portal.webhooks.tasks import retention_task as webhooks_retention

    node = make_node(sku=H100_SKU, state_dir=sim_dir)
    run = _run_with_log(node, order_state=OrderState.TERMINATED, status=RunStatus.SUCCEEDED,
                        finished_ago=timedelta(days=3000))
    OrderEvent.objects.create(order=run.order, transition="submit", from_state="draft",
                              to_state="submitted")
    RunEvent.objects.create(run=run, transition="start", from_state="pending", to_state="running")
    ancient = timezone.now() - timedelta(days=3000)
    for model in (OrderEvent, NodeEvent, RunEvent):
        model.objects.update(at=ancient)
    before = [m.objects.count() for m in (OrderEvent, NodeEvent, RunEvent, ProvisioningRun, StepRun)]

    for task in (retention_health_checks_task, retention_step_logs_task, accounts_retention,
                 orders_retention, webhooks_retention):
        task.apply().get()
    assert before == [m.objects.count() for m in (OrderEvent, NodeEvent, RunEvent,
                                                  ProvisioningRun, StepRun)]
    assert _lines(run) == 0  # while the log of that run, finished long ago, went


def test_each_retention_task_is_on_the_beat_schedule():
    scheduled = {entry["task"] for entry in settings.CELERY_BEAT_SCHEDULE.values()}
    assert {"provisioning.retention_health_checks", "provisioning.retention_step_logs",
            "webhooks.retention", "accounts.retention", "orders.retention",
            "api.idempotency_purge"} <= scheduled


@pytest.mark.celery_worker
@pytest.mark.usefixtures("require_postgres")
def test_a_worker_runs_the_beat_task_end_to_end(celery_worker_process, sim_dir):
    node = make_node(sku=H100_SKU, state_dir=sim_dir)
    day = (timezone.now() - timedelta(days=settings.HEALTH_CHECK_RETENTION_DAYS + 2)).date()
    noon = datetime(day.year, day.month, day.day, 12, tzinfo=UTC)
    old = [_check(node, noon + timedelta(minutes=m), ok=m % 2 == 0) for m in range(4)]
    kept = _check(node, timezone.now() - timedelta(hours=1))
    assert retention_health_checks_task.delay().id  # queued as beat does; the worker runs it
    deadline = time.monotonic() + 45
    while time.monotonic() < deadline and HealthCheck.objects.filter(pk__in=[c.pk for c in old]).exists():
        time.sleep(0.2)
    assert list(HealthCheck.objects.values_list("pk", flat=True)) == [kept.pk], \
        celery_worker_process.output()[-3000:]
    summary = HealthCheckDaily.objects.get(node=node, day=day)
    assert (summary.checks, summary.ok_count, summary.failed_count) == (4, 2, 2)


@pytest.mark.django_db
def test_the_run_page_says_why_an_old_runs_log_is_gone(client, login, people, sim_dir):
    from django.urls import reverse

    node = make_node(sku=H100_SKU, state_dir=sim_dir)
    now = timezone.now()
    window = timedelta(days=settings.STEP_LOG_RETENTION_DAYS)
    old = _run_with_log(node, order_state=OrderState.ACTIVE, status=RunStatus.SUCCEEDED,
                        finished_ago=NOW - now + window + timedelta(days=1))
    recent = _run_with_log(node, order_state=OrderState.ACTIVE, status=RunStatus.SUCCEEDED,
                           finished_ago=NOW - now + window - timedelta(days=1))
    retention_step_logs_task.apply().get()
    login(people.olga)
    page = client.get(reverse("provisioning:run", args=[old.pk])).content.decode()
    assert f"Step logs are kept {settings.STEP_LOG_RETENTION_DAYS} days after a run finishes" in page
    page = client.get(reverse("provisioning:run", args=[recent.pk])).content.decode()
    assert 'id="log-retention"' not in page
    assert _lines(recent) == 2


@pytest.mark.django_db
def test_resolved_alerts_go_after_their_window_and_open_ones_stay(sim_dir, settings):
    node = make_node(sku=H100_SKU, state_dir=sim_dir)
    window = timedelta(days=settings.NODE_ALERT_RETENTION_DAYS)

    def alert(fingerprint, *, resolved_ago):
        return NodeAlert.objects.create(
            node=node, name="GpuXidError", fingerprint=fingerprint, started_at=NOW - window * 2,
            resolved_at=None if resolved_ago is None else NOW - resolved_ago)

    old = alert("a" * 16, resolved_ago=window + timedelta(days=1))
    recent = alert("b" * 16, resolved_ago=window - timedelta(days=1))
    still_open = alert("c" * 16, resolved_ago=None)
    assert node_alerts_prune(now=NOW) == {"provisioning.NodeAlert": 1}
    assert set(NodeAlert.objects.values_list("pk", flat=True)) == {recent.pk, still_open.pk}
    assert not NodeAlert.objects.filter(pk=old.pk).exists()
    assert node_alerts_prune(now=NOW) == {}  # a second run finds nothing
    settings.NODE_ALERT_RETENTION_DAYS = 0
    assert node_alerts_prune(now=NOW + window * 10) == {}  # 0: kept forever
