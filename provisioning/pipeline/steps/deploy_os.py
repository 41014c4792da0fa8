"""Deploy OS: power the node on and install the image (``settings.PROVISIONING_OS_IMAGE``), then
Trainyard's node tools. A node that entered stock before clean baselines were recorded gets its
baseline here, before any tenant touches it (the hand-back's attestation compares with it)."""

from __future__ import annotations

from dataclasses import dataclass

from django.conf import settings

from provisioning.inventory.baseline import baseline_record
from provisioning.inventory.host_keys import node_pin_host_keys
from provisioning.pipeline.context import StepContext, StepResult
from provisioning.pipeline.node_tools import ensure_node_tools


@dataclass(frozen=True)
class DeployResult(StepResult):
    image: str = ""
    installed: bool = False
    host_keys_pinned: int = 0
    baseline_recorded: bool = False


def deploy_os(ctx: StepContext) -> DeployResult:
    image = settings.PROVISIONING_OS_IMAGE
    ctx.log(f"powering on {ctx.node.hostname}")
    ctx.driver.power("on")
    facts = ctx.driver.deploy_os(image=image, on_line=ctx.log)
    if facts.host_keys:
        node_pin_host_keys(node=ctx.node, host_keys=facts.host_keys, order=ctx.order)
        ctx.node.refresh_from_db(fields=["driver_options"])
        ctx.driver_options_changed()  # what follows connects to the new install, by its key
        ctx.log(f"{len(facts.host_keys)} new host key(s) of {ctx.node.hostname} pinned")
    recorded = ctx.node.baseline_at is None and not ctx.driver.simulated
    if recorded:
        entries = baseline_record(node=ctx.node, driver=ctx.driver,
                                  note=f"clean baseline recorded before order "
                                       f"{ctx.order.reference}")
        ctx.log(f"clean baseline of {ctx.node.hostname} recorded ({len(entries)} entries)",
                staff_only=True)
    ensure_node_tools(ctx)
    ctx.say(f"Operating system installed ({image})")
    return DeployResult(image=image, installed=facts.installed, host_keys_pinned=len(facts.host_keys),
                        baseline_recorded=recorded)
