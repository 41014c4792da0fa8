"""Configure: NVMe layout and network checks (the script is ``stack.scripts.configure_script``)."""

from __future__ import annotations

from dataclasses import dataclass

from provisioning.pipeline.context import StepContext, StepResult
from provisioning.stack.scripts import configure_script


@dataclass(frozen=True)
class ConfigureResult(StepResult):
    nvme: str = ""
    network: str = ""
    exit_status: int = 0


def configure(ctx: StepContext) -> ConfigureResult:
    ctx.run_script(configure_script(ctx.order, ctx.node), name="configure")
    return ConfigureResult(nvme=str(ctx.order.nvme), network=str(ctx.order.network),
                           exit_status=ctx.result.get("exit_status", 0))
