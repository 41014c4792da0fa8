"""Reserve: check the node is still reserved for this order (the reservation itself happened at
approval)."""

from __future__ import annotations

from dataclasses import dataclass

from provisioning.models import Node
from provisioning.pipeline.context import StepContext, StepFailed, StepResult
from provisioning.states import NodeState


@dataclass(frozen=True)
class ReserveResult(StepResult):
    node: str = ""
    fabric_group: str = ""


def reserve(ctx: StepContext) -> ReserveResult:
    node = Node.objects.get(pk=ctx.node.pk)
    if node.order_id != ctx.order.pk or node.state != NodeState.RESERVED:
        raise StepFailed(f"{node.hostname} is no longer reserved for order {ctx.order.reference} "
                         f"(it is {node.get_state_display().lower()}); swap the node.")
    ctx.say(f"Server {node.hostname} is reserved for your order")
    return ReserveResult(node=node.hostname, fabric_group=node.fabric_group)
