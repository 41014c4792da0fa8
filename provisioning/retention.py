"""Retention of fulfilment's growing tables (beat tasks in ``provisioning.tasks``; windows in
settings, documented in docs/operations.md "Retention").

- Health checks: each node's checks of a day are summarised into one ``HealthCheckDaily`` row
  once the day is over, and the checks are deleted HEALTH_CHECK_RETENTION_DAYS after they were
  taken; each node keeps its newest check whatever its age (the node's last known health). The
  summaries go after HEALTH_SUMMARY_RETENTION_DAYS.
- Step log lines: deleted STEP_LOG_RETENTION_DAYS after their run finished. Never those of a run
  in progress, nor of a failed run staff can still retry (its order still waits on it).
- Resolved monitoring alerts: deleted NODE_ALERT_RETENTION_DAYS after they were resolved (their
  opening and closing stay in the node's history); an open alert never.
- Runs, step runs (their results: access, acceptance report, hand-back attestation) and every
  transition event are kept: they are the fulfilment record and grow with orders, not with time.
"""

from __future__ import annotations

from collections import Counter
from datetime import UTC, date, datetime, time, timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import Count, Exists, Max, Min, OuterRef, Q

from portal.core.retention import delete_in_batches, retention_cutoff
from provisioning.models import HealthCheck, HealthCheckDaily, ProvisioningRun, StepLogLine
from provisioning.monitoring.models import NodeAlert
from provisioning.pipeline.runs import RUN_ORDER_STATES
from provisioning.states import RUN_DONE, RunStatus

ONE_DAY = timedelta(days=1)
# A day is summarised once it has been over this long: a check stamped just before midnight may
# commit just after it.
DAY_SETTLES_AFTER = timedelta(minutes=15)


def _day_start(day: date) -> datetime:
    return datetime.combine(day, time.min, tzinfo=UTC)


def health_checks_summarise(*, now: datetime) -> int:
    """Writes the summary of every (node, day) whose day is over and not summarised yet; returns
    how many rows it wrote. Days are summarised oldest first, each in one transaction, so every
    day up to the newest summary is summarised: a second run finds nothing to do."""
    newest = HealthCheckDaily.objects.aggregate(day=Max("day"))["day"]
    checks = HealthCheck.objects.order_by("at")
    if newest is not None:
        checks = checks.filter(at__gte=_day_start(newest + ONE_DAY))
    first = checks.values_list("at", flat=True).first()
    if first is None:
        return 0
    day, written = first.astimezone(UTC).date(), 0
    while day < (now - DAY_SETTLES_AFTER).astimezone(UTC).date():
        written += _summarise_day(day)
        day += ONE_DAY
    return written


def _summarise_day(day: date) -> int:
    failed, unreachable = Q(ok=False), Q(ok=False, gpu_count__isnull=True)
    rows = (HealthCheck.objects.filter(at__gte=_day_start(day), at__lt=_day_start(day + ONE_DAY))
            .order_by().values("node_id")
            .annotate(checks=Count("pk"), ok_count=Count("pk", filter=~failed),
                      failed_count=Count("pk", filter=failed),
                      unreachable_count=Count("pk", filter=unreachable),
                      max_temperature_c=Max("max_temperature_c"), max_ecc_errors=Max("ecc_errors"),
                      min_gpu_count=Min("gpu_count")))
    summaries = [HealthCheckDaily(day=day, worst=_worst(row), **row) for row in rows]
    with transaction.atomic():
        HealthCheckDaily.objects.bulk_create(summaries, ignore_conflicts=True, batch_size=1000)
    return len(summaries)


def _worst(row: dict) -> str:
    if row["failed_count"] > row["unreachable_count"]:
        return HealthCheckDaily.Worst.UNHEALTHY
    if row["unreachable_count"]:
        return HealthCheckDaily.Worst.UNREACHABLE
    return HealthCheckDaily.Worst.OK


def health_checks_prune(*, now: datetime, batch_size: int | None = None) -> Counter[str]:
    """Deletes checks older than the window whose day is summarised, except each node's newest."""
    cutoff = retention_cutoff(settings.HEALTH_CHECK_RETENTION_DAYS, now=now)
    newest_summary = HealthCheckDaily.objects.aggregate(day=Max("day"))["day"]
    if cutoff is None or newest_summary is None:
        return Counter()
    cutoff = min(cutoff, _day_start(newest_summary + ONE_DAY))
    newer = HealthCheck.objects.filter(node=OuterRef("node"), at__gt=OuterRef("at"))
    return delete_in_batches(HealthCheck.objects.filter(Exists(newer), at__lt=cutoff),
                             batch_size=batch_size)


def health_summaries_prune(*, now: datetime, batch_size: int | None = None) -> Counter[str]:
    cutoff = retention_cutoff(settings.HEALTH_SUMMARY_RETENTION_DAYS, now=now)
    if cutoff is None:
        return Counter()
    return delete_in_batches(HealthCheckDaily.objects.filter(day__lt=cutoff.astimezone(UTC).date()),
                             batch_size=batch_size)


def health_retention(*, now: datetime, batch_size: int | None = None) -> dict:
    """The beat task's work: summarise first, then delete (a check goes only once summarised)."""
    summarised = health_checks_summarise(now=now)
    deleted = (health_checks_prune(now=now, batch_size=batch_size)
               + health_summaries_prune(now=now, batch_size=batch_size))
    return {"summarised": summarised, "deleted": dict(deleted)}


def _retryable_failed_runs() -> Q:
    """A failed run whose order is still in a state where staff can retry or swap it."""
    waiting = Q()
    for kind, order_states in RUN_ORDER_STATES.items():
        waiting |= Q(kind=kind, order__state__in=order_states)
    return Q(status=RunStatus.FAILED) & waiting


def _runs_past_log_window(cutoff: datetime):
    return (ProvisioningRun.objects.filter(status__in=RUN_DONE, finished_at__lt=cutoff)
            .exclude(_retryable_failed_runs()))


def step_logs_prune(*, now: datetime, batch_size: int | None = None) -> Counter[str]:
    """Deletes the log lines of runs that finished before the window (see the module's note)."""
    cutoff = retention_cutoff(settings.STEP_LOG_RETENTION_DAYS, now=now)
    if cutoff is None:
        return Counter()
    finished = _runs_past_log_window(cutoff)
    return delete_in_batches(StepLogLine.objects.filter(step_run__run__in=finished.values("pk")),
                             batch_size=batch_size)


def run_log_past_window(run: ProvisioningRun, *, now: datetime) -> bool:
    """Whether ``run``'s log lines are past their window (its page says why they are gone)."""
    cutoff = retention_cutoff(settings.STEP_LOG_RETENTION_DAYS, now=now)
    return cutoff is not None and _runs_past_log_window(cutoff).filter(pk=run.pk).exists()


def node_alerts_prune(*, now: datetime, batch_size: int | None = None) -> Counter[str]:
    """Deletes alerts resolved before the window; an open alert stays however old."""
    cutoff = retention_cutoff(settings.NODE_ALERT_RETENTION_DAYS, now=now)
    if cutoff is None:
        return Counter()
    return delete_in_batches(NodeAlert.objects.filter(resolved_at__lt=cutoff), batch_size=batch_size)
