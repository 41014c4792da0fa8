"""Training stack: run the script of the renderer named in ``settings.PROVISIONING_STACK_RENDERER``
(``(*, order, node, nodes) -> str``; default: the built-in minimal bootstrap)."""

from __future__ import annotations

from dataclasses import dataclass

from django.conf import settings
from django.utils.module_loading import import_string

from provisioning.pipeline.context import StepContext, StepResult


@dataclass(frozen=True)
class StackResult(StepResult):
    strategy: str = ""
    tracker: str = ""
    renderer: str = ""


def stack(ctx: StepContext) -> StackResult:
    renderer = settings.PROVISIONING_STACK_RENDERER
    script = import_string(renderer)(order=ctx.order, node=ctx.node, nodes=ctx.cluster)
    ctx.run_script(script, name="stack")
    return StackResult(strategy=ctx.order.strategy.slug if ctx.order.strategy else "",
                       tracker=ctx.order.tracker.slug if ctx.order.tracker else "",
                       renderer=renderer)
