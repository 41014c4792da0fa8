"""Acceptance test: a real training job on the node (or across the cluster) plus each node's own
checks, stored as the ``AcceptanceReport`` the server page and the API show.

- The job: ``train_smoke.py`` through the stack's launcher (``etc/trainyard/launch.sh``): DDP,
  then FSDP2, loss must fall, a sharded checkpoint round trip through the order's bucket. On a
  cluster the step of the first node (rank 0) runs it on every node at once, after every
  node's stack step has succeeded (until then the step is retried: a transient wait).
- The node's checks: GPU health from the driver, then ``node_checks.py`` (nccl-tests against
  ``ServerSKU.nccl_busbw_gbps``, DCGM, memory of the plan's layout against the estimator).

A node declared a test host (driver option ``test_host: true``) gets ``TRAINYARD_TEST_HOST=1``:
gloo on CPU, and the GPU checks skip with that reason. A failed check fails the step with it.
See ``provisioning/acceptance``.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

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
from provisioning.acceptance.scripts import acceptance_script
from provisioning.drivers import DriverError, RunResult, driver_for, driver_options
from provisioning.health import MAX_GPU_TEMPERATURE_C, gpu_too_hot
from provisioning.models import StepRun
from provisioning.pipeline.context import StepContext, StepFailed
from provisioning.states import StepStatus

__all__ = ["AcceptanceCheck", "AcceptanceReport", "AcceptanceResult", "CheckpointRoundTrip",
           "acceptance", "is_test_host"]

# The job and the node checks together stay inside the step's deadline
# (PROVISIONING_STEP_DEADLINE_S, one hour by default).
JOB_TIMEOUT_S = 1200
CHECKS_TIMEOUT_S = 1200
TEST_HOST_REASON = "test host (driver option test_host): no GPUs by declaration"


def is_test_host(node) -> bool:
    return driver_options(node).get("test_host") is True


def acceptance(ctx: StepContext) -> AcceptanceResult:
    nodes = ctx.cluster
    if len(nodes) > 1:
        _wait_for_stacks(ctx)
    test_host = is_test_host(ctx.node)
    checks = list(_health_checks(ctx, test_host))
    fields: dict = {}
    tail: list[str] = []
    if ctx.rank == 0:
        try:
            job, tail = _run_job(ctx, nodes)
        except StepFailed as exc:  # no report: the reason is the check (the others still run)
            checks.append(AcceptanceCheck("training job", False, exc.message, status="fail"))
        else:
            fields = job_fields(job)
            checks += [AcceptanceCheck.from_node(c) for c in job.get("checks") or ()]
    else:
        checks.append(AcceptanceCheck("training job", True, f"runs across the cluster from "
                                      f"{nodes[0].hostname}", status="skip"))
    try:
        node_checks, _ = _run_on(ctx, ctx.node, _checks_script(ctx, test_host),
                                 name="acceptance-checks", marker=NODE_MARKER, timeout_s=CHECKS_TIMEOUT_S)
    except StepFailed as exc:
        checks.append(AcceptanceCheck("node checks", False, exc.message, status="fail",
                                      node=ctx.node.hostname))
    else:
        checks += [AcceptanceCheck.from_node(c, node=ctx.node.hostname)
                   for c in node_checks.get("checks") or ()]
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
    return AcceptanceResult(report=report)


def _wait_for_stacks(ctx: StepContext) -> None:
    waiting = list(StepRun.objects.filter(run=ctx.run, step="stack")
                   .exclude(status__in=(StepStatus.SUCCEEDED, StepStatus.SKIPPED))
                   .values_list("node__hostname", flat=True))
    if waiting:
        raise DriverError(f"waiting for the training stack on {', '.join(sorted(waiting))} before "
                          "the cluster's training job", permanent=False)


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


def _checks_script(ctx: StepContext, test_host: bool) -> str:
    probe, why = ("", TEST_HOST_REASON) if test_host else memory_probe(ctx.order.plan)
    return acceptance_script(job=False, checks=True, prefix="", gpus=ctx.order.sku.gpu_count,
                             baseline_busbw_gbps=ctx.order.sku.nccl_busbw_gbps,
                             probe_json=probe, probe_skip_reason=why)


def _run_job(ctx: StepContext, nodes) -> tuple[dict, list[str]]:
    """train-smoke on every node at once (one torchrun per node, one rendezvous); rank 0 prints
    the report. The other nodes are reached without their fence: their own acceptance steps
    hold it only for their local checks, and the job needs the cluster as one."""
    script = acceptance_script(job=True, checks=False,
                               prefix=f"acceptance/run-{ctx.run.pk}/attempt-{ctx.step_run.executions}")
    if len(nodes) == 1:
        return _run_on(ctx, ctx.node, script, name="acceptance", marker=JOB_MARKER,
                       timeout_s=JOB_TIMEOUT_S)
    # Drivers and environments are built here: the threads below touch no database.
    work = [(ctx.driver if node.pk == ctx.node.pk else driver_for(node),
             {**ctx.env, "TRAINYARD_NODE": node.hostname, "TRAINYARD_NODE_RANK": str(rank),
              **({"TRAINYARD_TEST_HOST": "1"} if is_test_host(node) else {})})
            for rank, node in enumerate(nodes)]
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

    env = {**ctx.env, **({"TRAINYARD_TEST_HOST": "1"} if is_test_host(node) else {})}
    result = ctx.driver.run(script, name=name, on_line=collect, env=env, timeout_s=timeout_s)
    return _read(result, lines, marker=marker, where=node.hostname)


def _read(result: RunResult, lines: list[str], *, marker: str, where: str) -> tuple[dict, list[str]]:
    """The marker's JSON, or StepFailed with the node's own words."""
    errors = [line.split(" ", 1)[-1] for line in lines if line.startswith(ERROR_MARKER + " ")]
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
    return data, [x for x in lines if not x.startswith(marker)]


def _shorten(line: str) -> str:
    for marker in (JOB_MARKER, NODE_MARKER):
        if line.startswith(marker + " "):
            return f"{marker} received ({len(line)} bytes; the report below)"
    return line
