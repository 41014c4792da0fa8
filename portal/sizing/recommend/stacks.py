"""Which training stack can run a layout (pure Python).

A stack (catalog ``StackOption`` of kind ``strategy``, here any object with its capability
attributes: ``StackOptionSpec`` or the model row) declares the data-parallel kinds it runs and
its features (tensor / pipeline / context parallelism, CPU offload, LoRA, QLoRA, fp8). A layout
*needs* some of them; the recommender proposes a layout only with a stack that has them all, and
the configurator and the API refuse a stack that lacks one, with ``stack_problem``'s sentence.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from portal.catalog.capabilities import DATA_PARALLEL_KINDS, FEATURES

from .strategies import BY_NAME

# The estimator's sharding value -> the stack's data-parallel kind that runs it. FSDP2 has no
# SHARD_GRAD_OP: it is FULL_SHARD without resharding after forward, so a full-shard stack runs it.
SHARDING_TO_DATA_PARALLEL = {
    "none": "ddp", "zero1": "zero1", "zero2": "zero2", "zero3": "zero3",
    "fsdp-full-shard": "fsdp2-full-shard", "fsdp-shard-grad-op": "fsdp2-full-shard",
    "fsdp-hybrid": "fsdp2-hybrid-shard",
}


@dataclass(frozen=True)
class Needs:
    """What a layout asks of the stack that runs it."""

    data_parallel: str | None = None  # a DATA_PARALLEL_KINDS key; None: unknown (partial plan)
    tp: int = 1
    pp: int = 1
    cp: int = 1
    offload: bool = False
    finetune: str = "full"  # full | lora | qlora
    fp8: bool = False

    @classmethod
    def of(cls, *, sharding: str, offload: str, tp: int = 1, pp: int = 1, cp: int = 1,
           finetune: str = "full", precision: str = "bf16-mixed") -> Needs:
        return cls(SHARDING_TO_DATA_PARALLEL.get(sharding), tp, pp, cp, offload not in ("", "none"),
                   finetune, precision == "fp8")

    @classmethod
    def from_plan(cls, plan: dict) -> Needs:
        """From a stored plan (``Plan.to_dict()``); a partial plan needs only what it names."""
        def whole(key: str) -> int:
            value = plan.get(key)
            return value if isinstance(value, int) and not isinstance(value, bool) and value > 1 else 1

        def text(key: str, default: str) -> str:
            value = plan.get(key)
            return value if isinstance(value, str) and value else default

        # A partial plan may name only the recommender's strategy (e.g. "zero3"): it says the rest.
        strategy = BY_NAME.get(text("strategy", ""))
        sharding = text("sharding", strategy.sharding if strategy else "")
        offload = text("offload", strategy.offload if strategy else "none")
        return cls(SHARDING_TO_DATA_PARALLEL.get(sharding), whole("tp"), whole("pp"), whole("cp"),
                   offload != "none", text("finetune", "full"), text("precision", "") == "fp8")


def missing(stack: Any, needs: Needs) -> list[str]:
    """What of `needs` the stack does not declare, as a person reads it (empty: it can run it)."""
    out = []
    kinds = getattr(stack, "data_parallel", None) or ()
    if needs.data_parallel and needs.data_parallel not in kinds:
        out.append(DATA_PARALLEL_KINDS[needs.data_parallel])
    for size, feature in ((needs.tp, "tensor_parallel"), (needs.pp, "pipeline_parallel"),
                          (needs.cp, "context_parallel")):
        if size > 1 and not getattr(stack, feature, False):
            out.append(f"{FEATURES[feature]} {size}")
    if needs.offload and not getattr(stack, "cpu_offload", False):
        out.append(FEATURES["cpu_offload"])
    if needs.finetune in ("lora", "qlora") and not getattr(stack, needs.finetune, False):
        out.append(FEATURES[needs.finetune])
    if needs.fp8 and not getattr(stack, "fp8", False):
        out.append(FEATURES["fp8"])
    return out


def strategy_stacks(stacks: Iterable[Any]) -> tuple[Any, ...]:
    return tuple(s for s in stacks if getattr(s, "kind", "strategy") == "strategy")


def choose_stack(needs: Needs, stacks: Iterable[Any], prefer: str = "") -> Any | None:
    """The stack that runs `needs`: `prefer` (the strategy's own) when it can, else the first
    in catalog order that can; None when none can."""
    able = [s for s in strategy_stacks(stacks) if not missing(s, needs)]
    return next((s for s in able if s.slug == prefer), able[0] if able else None)


def stack_problem(stack: Any, needs: Needs, stacks: Iterable[Any] = ()) -> str:
    """Why `stack` cannot run a plan that needs `needs`, naming a stack that can; "" when it can."""
    lacking = missing(stack, needs)
    if not lacking:
        return ""
    able = choose_stack(needs, stacks)
    advice = (f"choose {able.name}" if able is not None
              else "no stack in the catalog runs it; size the job again with other settings")
    return f"{stack.name} cannot run {_join(lacking)} of this plan: {advice}."


def _join(parts: list[str]) -> str:
    return parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " and " + parts[-1]
