"""Acceptance test: a real training job on the node (or across the cluster) plus each node's own
checks, stored as the ``AcceptanceReport`` the server page and the API show.

- The node's checks: GPU health from the driver, then ``node_checks.py`` (nccl-tests against
  ``ServerSKU.nccl_busbw_gbps``, DCGM, memory of the plan's layout against the estimator).
- The job: ``train_smoke.py`` through the stack's launcher (``etc/trainyard/launch.sh``): DDP
  (whose replicas must stay identical), then FSDP2, loss must fall, a sharded checkpoint round
  trip (through the order's bucket when there is one).

On a cluster the step of the first node (rank 0) runs the job on every node at once. It waits
first (``StepWaiting``: no attempt used up, bounded by the step's deadline) until every node's
stack step has succeeded and every other node's acceptance step has finished its own checks, so
the job never shares a node with that node's checks; a step of another node that failed ends the
wait at once, naming the node. Job and checks also work in separate directories.

Each node gets ``TRAINYARD_TEST_HOST`` from its own declaration (driver option ``test_host``):
``1`` on a CPU test host (gloo on CPU; the GPU checks skip with that reason), ``0`` elsewhere.
A failed check fails the step with it. See ``provisioning/acceptance``.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

from django.conf import settings

from provisioning.acceptance.exporters import exporters_check
from provisioning.acceptance.probe import memory_probe
from provisioning.acceptance.report import (
    ERROR_MARKER,
    JOB_MARKER,
    NODE_MARKER,
    AcceptanceCheck,
    AcceptanceReport,
    AcceptanceResult,
    CheckpointRoundTrip,
    ReportUnreadable,
    find_marker,
    job_fields,
)
from provisioning.acceptance.scripts import checks_script, job_script
from provisioning.drivers import DriverError, RunResult, driver_for, is_test_host
from provisioning.models import StepRun
from provisioning.monitoring.health import MAX_GPU_TEMPERATURE_C, gpu_too_hot
from provisioning.pipeline.context import StepContext, StepFailed, StepWaiting
from provisioning.states import STEP_DONE, StepStatus, step_spec

__all__ = ["AcceptanceCheck", "AcceptanceReport", "AcceptanceResult", "CheckpointRoundTrip",
           "acceptance", "is_test_host"]

# The job and the node checks together stay inside the step's deadline
# (PROVISIONING_STEP_DEADLINE_S, one hour by default).
JOB_TIMEOUT_S = 1200
CHECKS_TIMEOUT_S = 1200
CLUSTER_WAIT_S = 15.0  # how often the first node looks at the others while it waits
TEST_HOST_REASON = "test host (driver option test_host): no GPUs by declaration"


def acceptance(ctx: StepContext) -> AcceptanceResult:
    nodes = ctx.cluster
    if len(nodes) > 1 and ctx.rank == 0:
        _wait_for_cluster(ctx, nodes)
    test_host = is_test_host(ctx.node)
    checks = list(_health_checks(ctx, test_host))
    node_checks = _node_checks(ctx, test_host)  # before the job: the node is ours alone
    fields: dict = {}
    tail: list[str] = []
    if ctx.rank == 0:
        try:
            job, tail = _run_job(ctx, nodes)
        except StepFailed as exc:  # no report: the reason is the check
            checks.append(AcceptanceCheck("training job", False, exc.message, status="fail"))
        else:
            fields = job_fields(job)
            checks += [AcceptanceCheck.from_node(c) for c in job.get("checks") or ()]
    else:
        checks.append(AcceptanceCheck("training job", True, f"runs across the cluster from "
                                      f"{nodes[0].hostname}", status="skip"))
    checks += node_checks
    checks.append(exporters_check(ctx.node))
    health = ctx.result.pop("health", None) or {}
    report = AcceptanceReport(
        passed=not any(c.failed for c in checks), checks=tuple(checks),
        expected_gpu_count=ctx.order.sku.gpu_count, output_tail=tuple(tail[-20:]),
        **health, **{**fields, "test_host": test_host})
    for check in checks:
        ctx.log(f"{check.outcome.upper()} {check.node + ': ' if check.node else ''}{check.name}: "
                f"{check.detail}")
    if not report.passed:
        raise StepFailed(f"acceptance test failed: {report.failed_checks}",
                         result=AcceptanceResult(report=report).to_dict())
    ctx.say(_customer_summary(report))
    return AcceptanceResult(report=report)


def _customer_summary(report: AcceptanceReport) -> str:
    ran = [c for c in report.checks if c.outcome != "skip"]
    if not ran:  # a node of a cluster whose job runs from the first node, checks all skipped
        return "Acceptance test: nothing to check on this server by itself"
    return f"Acceptance test passed: {len(ran)} check{'s' if len(ran) != 1 else ''} passed"


def _wait_for_cluster(ctx: StepContext, nodes) -> None:
    """StepWaiting until every node's stack is installed and every other node's acceptance step
    (its own checks) has finished; StepFailed at once when a step of another node failed."""
    steps = list(StepRun.objects.filter(run=ctx.run, node__in=nodes).exclude(node=ctx.node)
                 .select_related("node").order_by("node__hostname", "position"))
    failed = next((sr for sr in steps if sr.status == StepStatus.FAILED), None)
    if failed is not None:
        label = step_spec(ctx.run.kind, failed.step).label.lower()
        why = (failed.error.strip().splitlines() or ["no reason recorded"])[0][:300]
        raise StepFailed(f"the cluster's training job cannot run: {label} failed on "
                         f"{failed.node.hostname} ({why})")
    stacks = sorted({sr.node.hostname for sr in steps
                     if sr.step == "stack" and sr.status not in STEP_DONE})
    if stacks:
        raise StepWaiting(f"waiting for the training stack on {', '.join(stacks)} before the "
                          "cluster's training job", retry_after_s=CLUSTER_WAIT_S)
    checking = sorted({sr.node.hostname for sr in steps
                       if sr.step == "acceptance" and sr.status not in STEP_DONE})
    if checking:
        raise StepWaiting(f"waiting for the node checks of {', '.join(checking)} to finish before "
                          "the cluster's training job", retry_after_s=CLUSTER_WAIT_S)


def _health_checks(ctx: StepContext, test_host: bool):
    if test_host:
        yield AcceptanceCheck("GPU health (nvidia-smi)", True, TEST_HOST_REASON, status="skip",
                              node=ctx.node.hostname)
        return
    expected = ctx.order.sku.gpu_count
    health = ctx.driver.health()
    hottest = health.max_temperature_c
    ctx.result["health"] = {"gpu_count": health.gpu_count, "max_temperature_c": hottest,
                            "ecc_errors": health.ecc_errors}
    node = ctx.node.hostname
    seen = f"{health.gpu_count} of {expected}"
    yield AcceptanceCheck("GPUs visible", health.gpu_count == expected,
                          seen if health.gpu_count or not health.raw else f"{seen}: {health.raw}",
                          status="pass" if health.gpu_count == expected else "fail", node=node,
                          value=health.gpu_count, threshold=expected, unit="GPUs")
    yield AcceptanceCheck("no uncorrected ECC errors", health.ecc_errors == 0,
                          f"{health.ecc_errors} error(s)",
                          status="pass" if health.ecc_errors == 0 else "fail", node=node)
    too_hot = gpu_too_hot(hottest)
    yield AcceptanceCheck(f"GPU temperature at most {MAX_GPU_TEMPERATURE_C:.0f} °C", not too_hot,
                          "n/a" if hottest is None else f"{hottest:.0f} °C",
                          status="fail" if too_hot else "pass", node=node, value=hottest,
                          threshold=MAX_GPU_TEMPERATURE_C, unit="°C")


def _node_checks(ctx: StepContext, test_host: bool) -> list[AcceptanceCheck]:
    probe, why = ("", TEST_HOST_REASON) if test_host else memory_probe(ctx.order.plan)
    script = checks_script(gpus=ctx.order.sku.gpu_count,
                           baseline_busbw_gbps=ctx.order.sku.nccl_busbw_gbps,
                           probe_json=probe, probe_skip_reason=why)
    try:
        data, _ = _run_on(ctx, ctx.node, script, name="acceptance-checks", marker=NODE_MARKER,
                          timeout_s=CHECKS_TIMEOUT_S)
    except StepFailed as exc:
        return [AcceptanceCheck("node checks", False, exc.message, status="fail",
                                node=ctx.node.hostname)]
    return [AcceptanceCheck.from_node(c, node=ctx.node.hostname) for c in data.get("checks") or ()]


def _run_job(ctx: StepContext, nodes) -> tuple[dict, list[str]]:
    """train-smoke on every node at once (one torchrun per node, one rendezvous); rank 0's node
    prints the report. The other nodes are reached without their fence: their own acceptance
    steps have finished (``_wait_for_cluster``), and the job needs the cluster as one."""
    script = job_script(prefix=f"acceptance/run-{ctx.run.pk}/attempt-{ctx.step_run.executions}",
                        steps=settings.PROVISIONING_ACCEPTANCE_STEPS,
                        bucket=ctx.order.has_object_storage)
    if len(nodes) == 1:
        return _run_on(ctx, ctx.node, script, name="acceptance", marker=JOB_MARKER,
                       timeout_s=JOB_TIMEOUT_S)
    # Drivers and environments are built here: the threads below touch no database.
    work = [(ctx.driver if node.pk == ctx.node.pk else driver_for(node), ctx.env_for(node))
            for node in nodes]
    with ThreadPoolExecutor(max_workers=len(nodes)) as pool:
        futures = [pool.submit(_run_quietly, driver, env, script) for driver, env in work]
        outcomes = [f.result() for f in futures]  # a DriverError on any node propagates here
    for node, (_, lines) in zip(nodes, outcomes, strict=True):
        for line in lines:
            ctx.log(f"[{node.hostname}] {_shorten(line)}")
    return _read(outcomes[0][0], outcomes[0][1], marker=JOB_MARKER, where=nodes[0].hostname)


def _run_quietly(driver, env: dict, script: str) -> tuple[RunResult, list[str]]:
    lines: list[str] = []
    result = driver.run(script, name="acceptance", on_line=lines.append, env=env,
                        timeout_s=JOB_TIMEOUT_S)
    return result, lines


def _run_on(ctx: StepContext, node, script: str, *, name: str, marker: str,
            timeout_s: float) -> tuple[dict, list[str]]:
    lines: list[str] = []

    def collect(line: str) -> None:
        lines.append(line)
        ctx.log(_shorten(line))

    result = ctx.driver.run(script, name=name, on_line=collect, env=ctx.env_for(node),
                            timeout_s=timeout_s)
    return _read(result, lines, marker=marker, where=node.hostname)


def _read(result: RunResult, lines: list[str], *, marker: str, where: str) -> tuple[dict, list[str]]:
    """The marker's JSON, or StepFailed with the node's own words."""
    errors = [line[line.index(ERROR_MARKER) + len(ERROR_MARKER):].strip()
              for line in lines if ERROR_MARKER + " " in line]
    if errors:
        raise StepFailed(f"{where}: {errors[-1]}")
    if result.asks_retry:
        raise DriverError(f"{where}: the acceptance script asked to be retried later", permanent=False)
    if not result.ok:
        last = result.output_tail[-1] if result.output_tail else "no output"
        raise StepFailed(f"{where}: the acceptance script exited with status {result.exit_status}: {last}")
    try:
        data = find_marker(lines, marker)
    except ReportUnreadable as exc:
        raise StepFailed(f"{where}: {exc}") from None
    if data is None:
        last = [x for x in lines if x.strip()][-1:] or ["no output"]
        raise StepFailed(f"{where}: no {marker} line in the output (last line: {last[0][:300]})")
    return data, [x for x in lines if marker + " " not in x]


def _shorten(line: str) -> str:
    for marker in (JOB_MARKER, NODE_MARKER):
        if marker + " " in line:
            return f"{marker} received ({len(line)} bytes; the report below)"
    return line
