"""Which training stack can run a layout (pure Python).

A stack (catalog ``StackOption`` of kind ``strategy``, here any object with its capability
attributes: ``StackOptionSpec`` or the model row) declares the data-parallel kinds it runs, the
model families it builds and its features (tensor / pipeline / context parallelism, CPU offload,
LoRA, QLoRA, fp8, op-level checkpointing). A layout *needs* some of them; the recommender
proposes a layout only with a stack that has them all, the configurator and the API refuse a
stack that lacks one, with ``stack_problem``'s sentence, and the stack renderer checks again.

A model's family is its architecture as the stacks build it (``model_family``), read from the
Hugging Face ``model_type`` its spec carries (``model_type_of``), never from its name: torchtitan
0.2.2 builds its own model definitions, and of those only llama3 at the shapes of its flavours
(``LLAMA3_FLAVOURS``) is a model this portal sizes; the Hugging Face stacks build them all.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from portal.catalog.capabilities import DATA_PARALLEL_KINDS, FEATURES, MODEL_FAMILIES
from portal.sizing.estimator import get_preset, list_presets
from portal.sizing.estimator.models import FAMILY_MODEL_TYPES, MODEL_TYPES

from .strategies import BY_NAME

# torchtitan 0.2.2's llama3 flavours (torchtitan/models/llama3/__init__.py, ``llama3_args``): its
# TransformerModelArgs, with the feed-forward size it computes and its fixed vocabulary (128256).
LLAMA3_FLAVOURS: dict[str, dict[str, Any]] = {
    "8B": {"dim": 4096, "n_layers": 32, "n_heads": 32, "n_kv_heads": 8,
           "ffn_dim_multiplier": 1.3, "multiple_of": 1024},
    "70B": {"dim": 8192, "n_layers": 80, "n_heads": 64, "n_kv_heads": 8,
            "ffn_dim_multiplier": 1.3, "multiple_of": 4096},
    "405B": {"dim": 16384, "n_layers": 126, "n_heads": 128, "n_kv_heads": 8,
             "ffn_dim_multiplier": 1.2, "multiple_of": 4096},
}
LLAMA3_VOCAB = 128256


def _llama3_ffn(dim: int, multiplier: float, multiple_of: int) -> int:
    """torchtitan's FeedForward hidden size (llama3/model/model.py)."""
    hidden = int(multiplier * int(2 * 4 * dim / 3))
    return multiple_of * ((hidden + multiple_of - 1) // multiple_of)


def llama3_flavour(spec: dict) -> str | None:
    """The torchtitan llama3 flavour whose architecture is exactly this model's, else None."""
    if spec.get("family") != "llama" or spec.get("num_experts") or spec.get("tie_word_embeddings"):
        return None
    if spec.get("model_type") not in (None, "", "llama"):
        return None
    if spec.get("qkv_bias") or spec.get("o_bias") or spec.get("mlp_bias"):
        return None
    for name, f in LLAMA3_FLAVOURS.items():
        shape = (f["dim"], f["n_layers"], f["n_heads"], f["n_kv_heads"],
                 _llama3_ffn(f["dim"], f["ffn_dim_multiplier"], f["multiple_of"]), LLAMA3_VOCAB)
        kv_heads = spec.get("num_kv_heads") or spec.get("num_heads")
        head_dim = spec.get("head_dim") or 0
        if head_dim and spec.get("num_heads") and head_dim * spec["num_heads"] != spec.get("hidden_size"):
            continue
        if (spec.get("hidden_size"), spec.get("num_layers"), spec.get("num_heads"), kv_heads,
                spec.get("intermediate_size"), spec.get("vocab_size")) == shape:
            return name
    return None


def preset_spec(model: str) -> dict | None:
    """The spec of the preset of that name, as a plan stores one (None: no such preset)."""
    name = model.strip().lower()
    if name not in list_presets():
        return None
    spec = get_preset(name)
    return {f: getattr(spec, f) for f in spec.__dataclass_fields__}


def family_of(model: Any) -> str | None:
    """The family of a workload's model: a preset name or an estimator ``ModelSpec``."""
    if isinstance(model, str):
        return model_family(model)
    fields = getattr(model, "__dataclass_fields__", None)
    return model_family(model.name, {f: getattr(model, f) for f in fields}) if fields else None


def model_type_of(model: Any, spec: Any = None) -> str | None:
    """The Hugging Face ``model_type`` of a plan's model (``model`` its name, ``spec`` its
    ``model_spec`` dict); None when unknown.

    The spec's own, when it names one of its family. A spec stored before specs carried it (no
    ``model_type``) reads the preset's of that name (of the same family); else its estimator
    family's, told apart within the llama family by what the spec's numbers say (config.json
    parsing gives experts only to Mixtral, q/k/v biases without an output bias only to Qwen2,
    per-head q/k norms only to Qwen3, Qwen3-MoE and Gemma 3, fused projections only to Phi-3, one
    rotary table for sliding and full layers only to Gemma 2, post-norms only to Gemma 2 and 3,
    unit-offset norms only to the Gemmas). This is the one fallback; stored quotes and orders got
    their model_type written by quotes migration 0004 / orders migration 0009."""
    spec = spec if isinstance(spec, dict) else {}
    own = spec.get("model_type")
    if isinstance(own, str) and own and MODEL_TYPES.get(own) == spec.get("family"):
        return own
    family = spec.get("family")
    preset = preset_spec(model) if isinstance(model, str) else None
    if preset is not None and family in (None, preset["family"]):
        return preset["model_type"]
    if family == "llama" and spec.get("num_experts"):
        return "qwen3_moe" if spec.get("qk_norm") else "mixtral"
    if family == "llama" and spec.get("qkv_bias") and not spec.get("o_bias"):
        return "qwen2"
    if family == "llama" and spec.get("shared_rope"):
        return "gemma2"
    if family == "llama" and spec.get("post_norms"):
        return "gemma3_text"
    if family == "llama" and spec.get("qk_norm"):
        return "qwen3"
    if family == "llama" and spec.get("fused_projections"):
        return "phi3"
    if family == "llama" and spec.get("unit_offset_norm"):
        return "gemma"
    return FAMILY_MODEL_TYPES.get(family) if isinstance(family, str) else None


def model_family(model: Any, spec: Any = None) -> str | None:
    """The family (``MODEL_FAMILIES`` key) of a model from its spec (``ModelSpec`` fields as a
    dict, as a plan stores them) or, without one, the preset of that name; None when unknown
    (a partial plan that names a model this portal has no numbers for)."""
    spec = spec if isinstance(spec, dict) and spec.get("family") else (
        preset_spec(model) if isinstance(model, str) else None)
    if spec is None:
        return None
    # the family the stacks build is the Hugging Face model_type itself (a MODEL_FAMILIES key),
    # but a llama of a torchtitan flavour's exact shape, which is "llama3"
    model_type = model_type_of(model, spec)
    if model_type not in MODEL_TYPES:
        return None
    return "llama3" if model_type == "llama" and llama3_flavour(spec) else model_type

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
    family: str | None = None  # a MODEL_FAMILIES key; None: unknown (partial plan)
    op_checkpointing: bool = False  # checkpointing "selective-op" (torchtitan's op-level SAC)

    @classmethod
    def of(cls, *, sharding: str, offload: str, tp: int = 1, pp: int = 1, cp: int = 1,
           finetune: str = "full", precision: str = "bf16-mixed", family: str | None = None,
           checkpointing: str = "") -> Needs:
        return cls(SHARDING_TO_DATA_PARALLEL.get(sharding), tp, pp, cp, offload not in ("", "none"),
                   finetune, precision == "fp8", family, checkpointing == "selective-op")

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
        # cp is a top-level key like tp and pp (stack_settings are display values only).
        return cls(SHARDING_TO_DATA_PARALLEL.get(sharding), whole("tp"), whole("pp"), whole("cp"),
                   offload != "none", text("finetune", "full"), text("precision", "") == "fp8",
                   model_family(plan.get("model"), plan.get("model_spec")),
                   text("checkpointing", "") == "selective-op")


def rendered_checkpointing(checkpointing: str, attention: str = "sdpa", stack: str = "") -> str:
    """What the estimator's checkpointing policy becomes in a stack's config: ``none``,
    ``full`` (every layer) or ``op`` (torchtitan's op-level SAC, ``selective-op``).

    Under torchtitan a plan's ``selective`` is its op-level SAC (``selective_ac_option = "op"``),
    the policy the recommender estimates for it (regimes.py). Elsewhere ``selective`` is the
    estimator's Korthikanti policy: recompute only the attention scores. SDPA and FlashAttention
    never keep the scores (they recompute them in backward), so under them the estimate has
    nothing to drop and the configs render no checkpointing; under eager attention no stack has
    that policy and the configs render ``full`` (less memory than the plan, about a third more
    compute)."""
    if checkpointing == "selective-op" or (checkpointing == "selective" and stack == "torchtitan"):
        return "op"
    if checkpointing == "full" or (checkpointing == "selective" and attention == "eager"):
        return "full"
    return "none"


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
    if needs.op_checkpointing and not getattr(stack, "op_level_checkpointing", False):
        out.append(FEATURES["op_level_checkpointing"])
    if needs.family and needs.family not in (getattr(stack, "model_families", None) or ()):
        out.append(f"model family {MODEL_FAMILIES.get(needs.family, needs.family)}")
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
