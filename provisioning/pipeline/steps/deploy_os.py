"""Deploy OS: power the node on and install the image (``settings.PROVISIONING_OS_IMAGE``)."""

from __future__ import annotations

from dataclasses import dataclass

from django.conf import settings

from provisioning.pipeline.context import StepContext, StepResult


@dataclass(frozen=True)
class DeployResult(StepResult):
    image: str = ""


def deploy_os(ctx: StepContext) -> DeployResult:
    image = settings.PROVISIONING_OS_IMAGE
    ctx.log(f"powering on {ctx.node.hostname}")
    ctx.driver.power("on")
    ctx.driver.deploy_os(image=image, on_line=ctx.log)
    return DeployResult(image=image)
