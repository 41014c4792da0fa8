"""Reads of an order's fulfilment for pages and the API: progress, access details, the acceptance
report (typed step results) and the last health of its nodes."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from datetime import datetime

from django.db.models import OuterRef, Prefetch, QuerySet, Subquery

from provisioning.models import HealthCheck, ProvisioningRun, StepLogLine, StepRun
from provisioning.pipeline.steps.acceptance import AcceptanceReport, AcceptanceResult
from provisioning.pipeline.steps.handover import HandoverResult
from provisioning.states import (
    NODE_FAILED,
    RUN_DONE,
    STEPS,
    NodeState,
    RunKind,
    StepStatus,
    step_spec,
)
from provisioning.storage.services import StorageResult


@dataclass(frozen=True)
class StepView:
    id: int
    name: str
    label: str
    status: str
    status_label: str
    attempts: int
    started_at: datetime | None
    finished_at: datetime | None
    error: str
    log_lines: tuple[str, ...]
    result: dict
    executions: int = 0  # every execution ever started (a staff retry resets ``attempts``)


@dataclass(frozen=True)
class NodeProgress:
    node_id: int
    hostname: str
    state: str
    state_label: str
    steps: tuple[StepView, ...]


@dataclass(frozen=True)
class OrderProgress:
    run_id: int | None
    kind: str
    run_status: str
    percent: int
    current: str  # "Deploy OS on gpu-a01", "" when idle
    error: str
    nodes: tuple[NodeProgress, ...] = field(default_factory=tuple)

    @property
    def done(self) -> bool:
        return self.run_status in RUN_DONE


def order_runs(order) -> QuerySet[ProvisioningRun]:
    return order.runs.order_by("-created_at", "-pk")


def order_progress(order, *, run: ProvisioningRun | None = None, log_lines: int = 30,
                   staff: bool = False) -> OrderProgress:
    """The latest run of ``order`` (or ``run``): per node, each step with status and log tail.
    The log holds the customer's lines unless ``staff`` (the run page) asks for the full text."""
    lines_shown = StepLogLine.objects.order_by("pk")
    if not staff:
        lines_shown = lines_shown.filter(staff_only=False)
    run = run or order_runs(order).first()
    if run is None:
        return OrderProgress(run_id=None, kind="", run_status="", percent=0, current="", error="")
    swapped_out = run.steps.filter(status=StepStatus.SKIPPED).values("node_id")
    steps = list(run.steps.exclude(node_id__in=swapped_out).select_related("node")
                 .prefetch_related(Prefetch("log_lines", queryset=lines_shown))
                 .order_by("node__hostname", "position"))
    by_node: dict[int, list[StepRun]] = {}
    for sr in steps:
        by_node.setdefault(sr.node_id, []).append(sr)
    nodes, current = [], ""
    for srs in by_node.values():
        node = srs[0].node
        views = []
        for sr in srs:
            spec = step_spec(run.kind, sr.step)
            lines = [line.text for line in sr.log_lines.all()][-log_lines:]
            views.append(StepView(id=sr.pk, name=sr.step, label=spec.label, status=sr.status,
                                  status_label=StepStatus(sr.status).label, attempts=sr.attempts,
                                  started_at=sr.started_at, finished_at=sr.finished_at,
                                  error=sr.error, log_lines=tuple(lines), result=sr.result,
                                  executions=sr.executions))
            if sr.status in (StepStatus.RUNNING, StepStatus.RETRYING) and not current:
                current = f"{spec.label} on {node.hostname}"
        label = NodeState(node.state).label
        if not staff and node.state in NODE_FAILED:  # "Failed: deploy" names our internals
            label = "Needs our attention"
        nodes.append(NodeProgress(node_id=node.pk, hostname=node.hostname, state=node.state,
                                  state_label=label, steps=tuple(views)))
    total = len(steps) or len(STEPS[run.kind])
    succeeded = sum(1 for sr in steps if sr.status == StepStatus.SUCCEEDED)
    return OrderProgress(run_id=run.pk, kind=run.kind, run_status=run.status,
                         percent=round(100 * succeeded / total), current=current, error=run.error,
                         nodes=tuple(nodes))


def acceptance_report(order) -> AcceptanceReport | None:
    """The report of the latest acceptance test on ``order`` that reported (passed, or failed
    with its checks), so the page says why a server was not handed over. On a cluster each
    node's step reports: the one that explains a failure, else the training job's (rank 0),
    with every other node's own checks (nccl-tests, DCGM, memory …) added to its table."""
    done = (StepStatus.SUCCEEDED, StepStatus.FAILED)
    latest_run = (StepRun.objects.filter(run__order=order, step="acceptance", status__in=done)
                  .exclude(result={}).order_by("-finished_at").values("run_id")[:1])
    steps = list(StepRun.objects.filter(run_id=Subquery(latest_run), step="acceptance",
                                        status__in=done).order_by("-finished_at"))
    latest = next((sr for sr in steps if sr.result), None)  # the newest that reported anything
    if latest is None or not latest.result.get("report"):
        return None
    reports = [AcceptanceResult.from_dict(sr.result).report for sr in steps]
    # A node whose checks failed explains the run's failure; else the training job's report.
    failed = next((r for r in reports if r.checks and not r.passed), None)
    main = failed or next((r for r in reports if r.trained), AcceptanceResult.from_dict(latest.result).report)
    return _with_node_checks(main, [r for r in reports if r is not main])


def _with_node_checks(main: AcceptanceReport, others: list[AcceptanceReport]) -> AcceptanceReport:
    seen = {(c.node, c.name) for c in main.checks}
    extra = sorted((c for r in others for c in r.checks if c.node and (c.node, c.name) not in seen),
                   key=lambda c: c.node)  # stable: each node's checks keep their order
    return replace(main, checks=main.checks + tuple(extra)) if extra else main


@dataclass(frozen=True)
class NodeAccess:
    hostname: str
    rank: int  # the node's rank in a cluster (hostname order, as the pipeline numbers them)
    handover: HandoverResult

    @property
    def simulated(self) -> bool:
        return self.handover.simulated

    @property
    def ssh_command(self) -> str:
        return self.handover.ssh_command

    @property
    def host_key_fingerprints(self) -> tuple[str, ...]:
        return tuple(self.handover.host_key_fingerprints or ())


@dataclass(frozen=True)
class OrderAccess:
    nodes: tuple[NodeAccess, ...] = ()
    storage: StorageResult | None = None  # the bucket, as the latest storage step recorded it


STORAGE_STEPS = ("storage", "rotate_storage_key")


def order_access(order) -> OrderAccess:
    """How the customer reaches the servers and the bucket of ``order``: what the handover step
    of its provisioning run and the latest storage step (set-up or key rotation) recorded."""
    handover_steps = (StepRun.objects.filter(run__order=order, run__kind=RunKind.PROVISION,
                                             status=StepStatus.SUCCEEDED, step="handover",
                                             node__order=order)
                      .select_related("node").order_by("node__hostname", "-finished_at"))
    handovers: dict[int, tuple[str, HandoverResult]] = {}
    for sr in handover_steps:
        handovers.setdefault(sr.node_id, (sr.node.hostname, HandoverResult.from_dict(sr.result)))
    nodes = tuple(NodeAccess(hostname=hostname, rank=rank, handover=result)
                  for rank, (hostname, result) in enumerate(handovers.values()))
    return OrderAccess(nodes=nodes, storage=_latest_storage(order))


def _latest_storage(order) -> StorageResult | None:
    latest = (StepRun.objects.filter(run__order=order, status=StepStatus.SUCCEEDED,
                                     step__in=STORAGE_STEPS)
              .order_by("-finished_at", "-pk").values_list("result", flat=True))
    for data in latest[:5]:
        try:
            result = StorageResult.from_dict(data)
        except ValueError:
            continue
        if result.ordered:
            return result
    return None


def order_last_health(order) -> list[HealthCheck]:
    """The latest health check of each node of ``order``, by hostname, in one query: each node's
    newest check found through the (node, at) index, whatever its history's length."""
    newest = (HealthCheck.objects.filter(node_id=OuterRef("node_id"))
              .order_by("-at", "-pk").values("pk")[:1])
    return list(HealthCheck.objects.filter(node__order=order, pk=Subquery(newest))
                .select_related("node").order_by("node__hostname"))
