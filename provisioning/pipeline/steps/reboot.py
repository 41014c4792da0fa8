"""Reboot (day 2): power-cycle the node and check its GPUs come back."""

from __future__ import annotations

from dataclasses import dataclass

from provisioning.pipeline.context import StepContext, StepResult


@dataclass(frozen=True)
class RebootResult(StepResult):
    gpu_count: int = 0


def reboot(ctx: StepContext) -> RebootResult:
    ctx.log(f"rebooting {ctx.node.hostname}")
    ctx.driver.power("reboot")
    health = ctx.driver.health()
    ctx.log(f"back up: {health.gpu_count} GPU(s) visible")
    return RebootResult(gpu_count=health.gpu_count)
