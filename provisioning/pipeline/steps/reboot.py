"""Reboot (day 2): power-cycle the node and check its GPUs come back."""

from __future__ import annotations

from dataclasses import dataclass

from provisioning.drivers import is_test_host
from provisioning.pipeline.context import StepContext, StepResult


@dataclass(frozen=True)
class RebootResult(StepResult):
    gpu_count: int = 0


def reboot(ctx: StepContext) -> RebootResult:
    if is_test_host(ctx.node):
        ctx.log(f"{ctx.node.hostname} is a declared test host: it is not rebooted, only checked "
                f"to be reachable")
    else:
        ctx.log(f"rebooting {ctx.node.hostname}")
    ctx.driver.power("reboot")
    health = ctx.driver.health()
    ctx.say(f"Rebooted: {health.gpu_count} GPU{'s' if health.gpu_count != 1 else ''} visible")
    return RebootResult(gpu_count=health.gpu_count)
