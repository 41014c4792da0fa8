"""Sentences a customer reads next to the plans."""

from __future__ import annotations

from portal.core.units import gb, hours, usd_approx

from .plan import Plan
from .types import Goal


def server(gpus_per_node: int, gpu_name: str, memory_bytes: int, nodes: int) -> str:
    base = f"{gpus_per_node}× {short_gpu(gpu_name)} {memory_bytes / 1e9:.0f} GB"
    return base if nodes == 1 else f"{nodes} nodes of {base} ({nodes * gpus_per_node} GPUs)"


def short_gpu(name: str) -> str:
    name = name.replace("NVIDIA ", "").replace("GeForce ", "")
    for suffix in (" 40GB", " 80GB", " 94GB", " 141GB", " 180GB", " 48GB", " 24GB"):
        name = name.replace(suffix, "")
    return name


def layout(plan: Plan, strategy_label: str) -> str:
    parts = [strategy_label]
    if plan.tp > 1:
        parts.append(f"TP {plan.tp}")
    if plan.pp > 1:
        parts.append(f"PP {plan.pp}")
    parts.append(f"micro-batch {plan.micro_batch} × {plan.grad_accum} accumulation")
    if plan.checkpointing != "none":
        parts.append(f"{plan.checkpointing} activation checkpointing")
    return ", ".join(parts)


def why(plan: Plan, goal: Goal, goal_met: bool, strategy_label: str) -> str:
    what = {
        "fastest": "the fastest configuration in the catalog",
        "cheapest": "the cheapest way to finish the job",
        "deadline": f"the cheapest configuration that finishes within {hours(goal.deadline_hours or 0)}",
        "budget": f"the fastest configuration within {usd_approx(goal.budget_usd or 0)}",
    }[goal.kind]
    if not goal_met:
        what = (f"the fastest configuration, though none finishes within "
                f"{hours(goal.deadline_hours or 0)}" if goal.kind == "deadline" else
                f"the cheapest configuration, though none fits your budget of "
                f"{usd_approx(goal.budget_usd or 0)}")
    return (
        f"{server(plan.gpus_per_node, plan.gpu_name, plan.gpu_memory_bytes, plan.nodes)} is {what}:"
        f" {layout(plan, strategy_label)} needs {gb(plan.memory.total)} of {gb(plan.usable_memory_bytes)}"
        f" usable per GPU ({gb(plan.headroom_bytes)} headroom), trains at {plan.tokens_per_second:,.0f}"
        f" tokens/s and finishes in {hours(plan.train_hours)} for {usd_approx(plan.price_total_usd)}"
        f" ({usd_approx(plan.price_hourly_usd)}/h)."
    )


def alternative(kind: str, plan: Plan, ref: Plan) -> str:
    dt = plan.train_hours - ref.train_hours
    dc = plan.price_total_usd - ref.price_total_usd
    return (
        f"{kind}: {server(plan.gpus_per_node, plan.gpu_name, plan.gpu_memory_bytes, plan.nodes)} in"
        f" {hours(plan.train_hours)} for {usd_approx(plan.price_total_usd)}"
        f" ({'+' if dt >= 0 else '−'}{hours(abs(dt))}, {'+' if dc >= 0 else '−'}{usd_approx(abs(dc))})."
    )


def other_gpu(point, ref: Plan, sku_name: str) -> str:
    """The same job on another GPU family (a ``Point``), against the chosen plan."""
    dt = point.train_hours - ref.train_hours
    dc = point.price_total_usd - ref.price_total_usd
    nodes = f"{point.nodes} × {sku_name}" if point.nodes > 1 else sku_name
    return (
        f"On {nodes}: in {hours(point.train_hours)} for {usd_approx(point.price_total_usd)}"
        f" ({'+' if dt >= 0 else '−'}{hours(abs(dt))}, {'+' if dc >= 0 else '−'}{usd_approx(abs(dc))})."
    )


def rejection(gpus_per_node: int, gpu_name: str, memory_bytes: int, nodes: int, needed: int, usable: int,
              strategy_label: str, offload_cpu_bytes: int = 0, offload_label: str = "",
              host_ram_bytes: int = 0) -> str:
    where = server(gpus_per_node, gpu_name, memory_bytes, nodes)
    text = f"{where}: "
    if needed > usable:
        text += f"needs {gb(needed)} per GPU with {strategy_label} ({gb(usable)} usable)"
        if offload_cpu_bytes:
            text += "; "
    if offload_cpu_bytes:
        text += (f"{offload_label} fits the GPUs but needs {gb(offload_cpu_bytes)} of host RAM per node"
                 f" ({gb(host_ram_bytes)} usable)")
    return text
