"""The sweeper (celery beat, on a queue of its own): fails executions past their deadline, finds
steps whose worker vanished, runs nobody started and work whose queueing failed (broker down),
and gives back expired reservations. Safe to run at any time and in parallel. It returns what
to queue; the task queues it.

A step's deadline counts from the start of its current execution (``claimed_at``); a step
waiting to retry has no execution and is not timed out."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from django.conf import settings
from django.db.models import Q
from django.utils import timezone

from provisioning.inventory import allocation
from provisioning.models import ProvisioningRun, StepRun
from provisioning.pipeline.engine import step_deadline_s, step_fail_stuck
from provisioning.pipeline.runs import StepKey, run_frontier
from provisioning.states import RunStatus, StepStatus


@dataclass(frozen=True)
class Sweep:
    failed: int  # steps failed for outliving their deadline
    requeue: tuple[StepKey, ...]  # steps nobody is working on: queue them again
    unstarted: tuple[int, ...]  # ids of pending runs nobody started: start them
    reservations_expired: tuple[str, ...]  # references of orders whose nodes went back

    def summary(self) -> dict[str, int]:
        return {"failed": self.failed, "requeued": len(self.requeue),
                "started": len(self.unstarted), "reservations_expired": len(self.reservations_expired)}


def sweep(*, now=None) -> Sweep:
    now = now or timezone.now()
    failed = 0
    for sr in StepRun.objects.filter(status=StepStatus.RUNNING,
                                     run__status=RunStatus.RUNNING).select_related("run"):
        deadline_s = step_deadline_s(sr.step)
        began = sr.claimed_at or sr.started_at
        if began and (now - began).total_seconds() > deadline_s:
            if step_fail_stuck(step_run=sr, message=(
                    f"{sr.step} timed out: still unfinished after "
                    f"{span((now - began).total_seconds())} (deadline {span(deadline_s)})")):
                failed += 1
    grace = timedelta(seconds=settings.PROVISIONING_STEP_LEASE_S)
    requeue = []
    for run in ProvisioningRun.objects.filter(status=RunStatus.RUNNING):
        for key in run_frontier(run):
            sr = run.steps.get(node_id=key[1], step=key[2])
            quiet_since = sr.lease_expires_at or sr.retry_at or _previous_finished(sr) or run.started_at
            if run.queue_error or quiet_since is None or now - quiet_since > grace:
                requeue.append(key)
    unstarted = tuple(ProvisioningRun.objects.filter(status=RunStatus.PENDING)
                      .filter(Q(created_at__lt=now - grace) | ~Q(queue_error=""))
                      .values_list("pk", flat=True))
    # Picked up: the task queues it now (a failure there is recorded again).
    ProvisioningRun.objects.exclude(queue_error="").update(queue_error="")
    expired = allocation.reservations_expire(now=now)
    return Sweep(failed=failed, requeue=tuple(requeue), unstarted=unstarted,
                 reservations_expired=tuple(expired))


def span(seconds: float) -> str:
    """A deadline or an age as the step error shows it: seconds under a minute, else minutes."""
    return f"{int(seconds)} s" if seconds < 60 else f"{int(seconds // 60)} min"


def _previous_finished(sr: StepRun):
    return (StepRun.objects.filter(run_id=sr.run_id, node_id=sr.node_id, position__lt=sr.position)
            .order_by("-position").values_list("finished_at", flat=True).first())
