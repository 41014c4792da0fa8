"""The sweeper (celery beat): fails steps past their deadline, finds steps whose worker vanished
and runs nobody started, and gives back expired reservations. Safe to run at any time and in
parallel. It returns what to queue; the task queues it."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from django.conf import settings
from django.utils import timezone

from provisioning import allocation
from provisioning.models import ProvisioningRun, StepRun
from provisioning.pipeline.engine import step_deadline_s, step_fail_stuck
from provisioning.runs import StepKey, run_frontier
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
    for sr in StepRun.objects.filter(status__in=[StepStatus.RUNNING, StepStatus.RETRYING],
                                     run__status=RunStatus.RUNNING).select_related("run"):
        deadline = timedelta(seconds=step_deadline_s(sr.step))
        if sr.started_at and now - sr.started_at > deadline:
            minutes = int((now - sr.started_at).total_seconds() // 60)
            if step_fail_stuck(step_run=sr, message=(
                    f"{sr.step} timed out: still unfinished after {minutes} min "
                    f"(deadline {int(deadline.total_seconds() // 60)} min)")):
                failed += 1
    grace = timedelta(seconds=settings.PROVISIONING_STEP_LEASE_S)
    requeue = []
    for run in ProvisioningRun.objects.filter(status=RunStatus.RUNNING):
        for key in run_frontier(run):
            sr = run.steps.get(node_id=key[1], step=key[2])
            quiet_since = sr.lease_expires_at or sr.retry_at or _previous_finished(sr) or run.started_at
            if quiet_since is None or now - quiet_since > grace:
                requeue.append(key)
    unstarted = tuple(ProvisioningRun.objects.filter(status=RunStatus.PENDING,
                                                     created_at__lt=now - grace)
                      .values_list("pk", flat=True))
    expired = allocation.reservations_expire(now=now)
    return Sweep(failed=failed, requeue=tuple(requeue), unstarted=unstarted,
                 reservations_expired=tuple(expired))


def _previous_finished(sr: StepRun):
    return (StepRun.objects.filter(run_id=sr.run_id, node_id=sr.node_id, position__lt=sr.position)
            .order_by("-position").values_list("finished_at", flat=True).first())
