"""Parallel strategies the recommender searches, and the framework limits on combining them.

Each strategy maps to the estimator's (sharding, offload) pair, a training stack from the
catalog, and an MFU factor (share of the estimator's planning MFU the strategy reaches).
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
    mfu_factor: float


# Which stack runs a layout (and whether TP or PP is allowed with it) is the catalog's word:
# each stack declares its capabilities (stacks.py); these are only the preferred stacks.
# MFU factors are planning values: sharded strategies spend time in extra all-gathers that
# do not fully overlap (ZeRO paper, FSDP paper: 5-10 % below DDP at the same batch); CPU
# offload is bound by the host Adam step and PCIe transfers (ZeRO-Offload reports ~30-40 %
# of peak against ~50 % without offload; parameter offload, ZeRO-Infinity, is slower still).
STRATEGIES: tuple[Strategy, ...] = (
    Strategy("ddp", "DDP", "none", "none", "ddp", 1.00),
    Strategy("zero1", "ZeRO-1", "zero1", "none", "deepspeed", 1.00),
    Strategy("zero2", "ZeRO-2", "zero2", "none", "deepspeed", 0.98),
    Strategy("fsdp", "FSDP full shard", "fsdp-full-shard", "none", "fsdp", 0.95),
    Strategy("zero3", "ZeRO-3", "zero3", "none", "deepspeed", 0.93),
    Strategy("zero2-offload", "ZeRO-2 + CPU offload (optimizer)", "zero2", "optimizer", "deepspeed", 0.65),
    Strategy("zero3-offload", "ZeRO-3 + CPU offload (optimizer)", "zero3", "optimizer", "deepspeed", 0.60),
    Strategy("fsdp-offload", "FSDP + CPU offload", "fsdp-full-shard", "optimizer+params", "fsdp", 0.45),
    Strategy("zero3-offload-all", "ZeRO-3 + CPU offload (optimizer + parameters)", "zero3",
             "optimizer+params", "deepspeed", 0.40),
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


def layout_supported(strategy: Strategy, tp: int, pp: int, world: int) -> bool:
    """The shape alone (the stack's capabilities are checked in stacks.py)."""
    # Sharding or gradient all-reduce needs data-parallel ranks; plain single-GPU runs are DDP.
    dp = world // (tp * pp)
    return not (dp == 1 and strategy.sharding != "none" and strategy.offload == "none")
