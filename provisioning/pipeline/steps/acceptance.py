"""Acceptance test: the acceptance script plus the driver's GPU health, as a report the customer's
server page shows (``AcceptanceReport``)."""

from __future__ import annotations

from dataclasses import dataclass

from provisioning.health import MAX_GPU_TEMPERATURE_C, gpu_too_hot
from provisioning.pipeline.context import StepContext, StepFailed, StepResult
from provisioning.stack.scripts import acceptance_script


@dataclass(frozen=True)
class AcceptanceCheck(StepResult):
    name: str = ""
    ok: bool = False
    detail: str = ""


@dataclass(frozen=True)
class AcceptanceReport(StepResult):
    passed: bool = False
    checks: tuple[AcceptanceCheck, ...] = ()
    gpu_count: int = 0
    expected_gpu_count: int = 0
    max_temperature_c: float | None = None
    ecc_errors: int = 0
    output_tail: tuple[str, ...] = ()

    @classmethod
    def from_dict(cls, data: dict | None) -> AcceptanceReport:
        data = data if isinstance(data, dict) else {}
        report = super().from_dict(data)
        return cls(**{**report.__dict__,
                      "checks": tuple(AcceptanceCheck.from_dict(c) for c in data.get("checks") or ()),
                      "output_tail": tuple(data.get("output_tail") or ())})

    @property
    def failed_checks(self) -> str:
        return "; ".join(f"{c.name} ({c.detail})" for c in self.checks if not c.ok)


@dataclass(frozen=True)
class AcceptanceResult(StepResult):
    report: AcceptanceReport = AcceptanceReport()

    @classmethod
    def from_dict(cls, data: dict | None) -> AcceptanceResult:
        data = data if isinstance(data, dict) else {}
        return cls(report=AcceptanceReport.from_dict(data.get("report")))


def acceptance(ctx: StepContext) -> AcceptanceResult:
    expected = ctx.order.sku.gpu_count
    script_result = ctx.driver.run(acceptance_script(expected), name="acceptance", on_line=ctx.log,
                                   env=ctx.env)
    health = ctx.driver.health()
    hottest = health.max_temperature_c
    checks = (
        AcceptanceCheck("acceptance script", script_result.ok,
                        f"exit status {script_result.exit_status}"),
        AcceptanceCheck("GPUs visible", health.gpu_count == expected,
                        f"{health.gpu_count} of {expected}"),
        AcceptanceCheck("no uncorrected ECC errors", health.ecc_errors == 0,
                        f"{health.ecc_errors} error(s)"),
        AcceptanceCheck(f"GPU temperature at most {MAX_GPU_TEMPERATURE_C:.0f} °C",
                        not gpu_too_hot(hottest), "n/a" if hottest is None else f"{hottest:.0f} °C"),
    )
    report = AcceptanceReport(
        passed=all(c.ok for c in checks), checks=checks, gpu_count=health.gpu_count,
        expected_gpu_count=expected, max_temperature_c=hottest, ecc_errors=health.ecc_errors,
        output_tail=tuple(script_result.output_tail))
    for check in checks:
        ctx.log(f"{'PASS' if check.ok else 'FAIL'} {check.name}: {check.detail}")
    if not report.passed:
        raise StepFailed(f"acceptance test failed: {report.failed_checks}",
                         result=AcceptanceResult(report=report).to_dict())
    return AcceptanceResult(report=report)
