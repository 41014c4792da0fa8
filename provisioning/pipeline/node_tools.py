"""Trainyard's node tools (``/opt/trainyard/tools``, ``stack/sh/node_tools.sh``): installed by
the deploy step, and made sure of again before termination copies the checkpoints (a node
deployed before they existed, or whose tools were damaged, still hands back its data)."""

from __future__ import annotations

from provisioning.pipeline.context import StepContext
from provisioning.stack.scripts import node_tools_env, node_tools_script


def ensure_node_tools(ctx: StepContext) -> None:
    """Kept when present (a marker check), built otherwise; a simulated node has no disk."""
    if ctx.driver.simulated:
        return
    ctx.run_script(node_tools_script(), name="node_tools", env=node_tools_env())
