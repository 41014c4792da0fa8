"""Parallel strategies the recommender searches, and the framework limits on combining them.

Each strategy maps to the estimator's (sharding, offload) pair and a preferred training stack
from the catalog. How fast it runs is the estimator's word alone (its time model: compute,
communication per tier and what overlaps it, CPU offload), in the regime of the stack that runs
it (regimes.py), so there is no per-strategy speed factor here.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Strategy:
    name: str
    label: str
    sharding: str  # estimator ParallelConfig.sharding
    offload: str  # estimator ParallelConfig.offload
    stack: str  # the catalog stack that runs it when it can (stacks.choose_stack); else another


# Which stack runs a layout (and whether TP or PP is allowed with it) is the catalog's word:
# each stack declares its capabilities (stacks.py); these are only the preferred stacks.
# FSDP's CPU offload (CPUOffloadPolicy) moves parameters, gradients and optimizer together.
STRATEGIES: tuple[Strategy, ...] = (
    Strategy("ddp", "DDP", "none", "none", "ddp"),
    Strategy("zero1", "ZeRO-1", "zero1", "none", "deepspeed"),
    Strategy("zero2", "ZeRO-2", "zero2", "none", "deepspeed"),
    Strategy("fsdp", "FSDP full shard", "fsdp-full-shard", "none", "fsdp"),
    Strategy("hsdp", "FSDP hybrid shard (HSDP)", "fsdp-hybrid", "none", "fsdp"),
    Strategy("zero3", "ZeRO-3", "zero3", "none", "deepspeed"),
    Strategy("zero2-offload", "ZeRO-2 + CPU offload (optimizer)", "zero2", "optimizer", "deepspeed"),
    Strategy("zero3-offload", "ZeRO-3 + CPU offload (optimizer)", "zero3", "optimizer", "deepspeed"),
    Strategy("fsdp-offload", "FSDP + CPU offload", "fsdp-full-shard", "optimizer+params", "fsdp"),
    Strategy("zero3-offload-all", "ZeRO-3 + CPU offload (optimizer + parameters)", "zero3",
             "optimizer+params", "deepspeed"),
)
BY_NAME = {s.name: s for s in STRATEGIES}


def get_strategy(name: str) -> Strategy:
    try:
        return BY_NAME[name]
    except KeyError:
        raise ValueError(f"unknown strategy {name!r}; use one of: {', '.join(BY_NAME)}") from None


def max_tp(interconnect: str, gpus_per_node: int) -> int:
    """Tensor parallel stays inside a node and on NVLink: every GPU over NVSwitch; a bridged pair
    (tp=2) on an NVLink-bridge server (a TP group of 4 there would talk over PCIe); none over
    plain PCIe (a TP all-reduce per layer at 32-64 GB/s costs more than it saves)."""
    if interconnect == "nvswitch":
        return gpus_per_node
    if interconnect == "nvlink-bridge":
        return min(2, gpus_per_node)
    return 1


def shape_supported(strategy: Strategy, tp: int, pp: int) -> bool:
    """The part of layout_supported that does not depend on the world size."""
    if strategy.offload != "none" and (tp > 1 or pp > 1):
        # CPU offload is FSDP's and ZeRO's last resort for a data-parallel layout; TP and PP split
        # the model over GPUs without the host round trip, so they are not combined with it
        return False
    # HSDP: no pipeline stage spans the shard group (see layout_supported)
    return not (strategy.sharding == "fsdp-hybrid" and pp > 1)


def layout_supported(strategy: Strategy, tp: int, pp: int, world: int, gpus_per_node: int = 0) -> bool:
    """The shape alone (the stack's capabilities are checked in stacks.py)."""
    if not shape_supported(strategy, tp, pp):
        return False
    # Sharding or gradient all-reduce needs data-parallel ranks; plain single-GPU runs are DDP.
    dp = world // (tp * pp)
    if dp == 1 and strategy.sharding != "none" and strategy.offload == "none":
        return False
    if strategy.sharding == "fsdp-hybrid":
        # HSDP shards inside a node and replicates across nodes (both stacks render it so): it
        # needs more than one node, and each node's GPUs must hold whole data-parallel ranks
        return bool(gpus_per_node) and world > gpus_per_node and not gpus_per_node % tp
    return True
