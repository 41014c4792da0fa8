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
    stack: str  # catalog stack option slug
    mfu_factor: float
    allows_tp: bool  # framework supports tensor parallel with it
    allows_pp: bool  # framework supports pipeline parallel with it


# MFU factors are planning values: sharded strategies spend time in extra all-gathers that
# do not fully overlap (ZeRO paper, FSDP paper: 5-10 % below DDP at the same batch); CPU
# offload is bound by the host Adam step and PCIe transfers (ZeRO-Offload reports ~30-40 %
# of peak against ~50 % without offload; parameter offload, ZeRO-Infinity, is slower still).
STRATEGIES: tuple[Strategy, ...] = (
    Strategy("ddp", "DDP", "none", "none", "ddp", 1.00, True, True),
    Strategy("zero1", "ZeRO-1", "zero1", "none", "deepspeed", 1.00, True, True),
    Strategy("zero2", "ZeRO-2", "zero2", "none", "deepspeed", 0.98, True, False),
    Strategy("fsdp", "FSDP full shard", "fsdp-full-shard", "none", "fsdp", 0.95, True, False),
    Strategy("zero3", "ZeRO-3", "zero3", "none", "deepspeed", 0.93, False, False),
    Strategy("zero2-offload", "ZeRO-2 + CPU offload (optimizer)", "zero2", "optimizer",
             "deepspeed", 0.65, False, False),
    Strategy("zero3-offload", "ZeRO-3 + CPU offload (optimizer)", "zero3", "optimizer",
             "deepspeed", 0.60, False, False),
    Strategy("fsdp-offload", "FSDP + CPU offload", "fsdp-full-shard", "optimizer+params", "fsdp",
             0.45, False, False),
    Strategy("zero3-offload-all", "ZeRO-3 + CPU offload (optimizer + parameters)", "zero3",
             "optimizer+params", "deepspeed", 0.40, False, False),
)
BY_NAME = {s.name: s for s in STRATEGIES}


def get_strategy(name: str) -> Strategy:
    try:
        return BY_NAME[name]
    except KeyError:
        raise ValueError(f"unknown strategy {name!r}; use one of: {', '.join(BY_NAME)}") from None


def max_tp(interconnect: str, gpus_per_node: int) -> int:
    """Tensor parallel stays inside a node; above 2 only over NVSwitch (an NVLink bridge joins
    pairs of GPUs, so a TP group of 4 on a bridged server would talk over PCIe)."""
    return gpus_per_node if interconnect == "nvswitch" else min(2, gpus_per_node)


def layout_supported(strategy: Strategy, tp: int, pp: int, world: int) -> bool:
    if tp > 1 and not strategy.allows_tp:
        return False
    if pp > 1 and not strategy.allows_pp:
        return False
    # Sharding or gradient all-reduce needs data-parallel ranks; plain single-GPU runs are DDP.
    dp = world // (tp * pp)
    return not (dp == 1 and strategy.sharding != "none" and strategy.offload == "none")
