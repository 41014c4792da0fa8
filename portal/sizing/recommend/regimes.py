"""What each training stack actually runs, as estimator knobs (pure data).

A plan is sized in the regime its stack's launch config runs, not in the estimator's defaults.
The configs are rendered by ``provisioning/stack/{accelerate,deepspeed,torchtitan}.py`` (and the
``ddp`` stack renders no training config: the customer's script under torchrun, PyTorch AMP);
this module restates what those renderers fix, stack option slug by slug, because the pure
recommender cannot import provisioning. ``tests/sizing/test_stack_regimes.py`` renders every
stack's config and checks it against this table, so the two cannot drift apart silently.

- ddp: autocast (fp32 weights, PyTorch AMP), eager kernels; checkpointing none / full (HF
  gradient checkpointing recomputes whole layers).
- every stack: QLoRA with sharded weights (FSDP full/hybrid shard, ZeRO-3) stores the 4-bit
  weights in the half type (adapters.json's bnb_4bit_quant_storage), so they are sharded.
- every stack: LoRA and QLoRA adapt every linear of the attention and MLP blocks with LoRA
  dropout 0.05 (adapters.json's LoraConfig): each adapter saves its own dropped input copy.
- fsdp (Accelerate FSDP2): fsdp2 layout with reduce_dtype bf16 (Accelerate's mixed_precision
  policy), eager; none / full (``fsdp_activation_checkpointing``); CPU offload moves
  parameters, gradients and optimizer; HSDP shards within a node, replicates across nodes.
  Micro-batches accumulate inside ``no_sync``: Accelerate's ``accumulate()`` (the stack pins
  accelerate 1.15) skips the gradient sync on every micro-batch but the last unless the
  script sets ``sync_each_batch``, and for FSDP2 its ``no_sync`` calls
  ``set_requires_gradient_sync(False)`` (accelerator.py, since ec92b1af): each GPU holds the
  whole model's gradients while they accumulate (``fsdp_no_sync``; not under CPU offload).
- deepspeed: master layout (bf16 weights, fp32 master), eager; none / full; ZeRO buckets from
  the hidden size h as the renderer writes them: reduce h², prefetch 0.9 h², persistence
  10 h, overlap_comm on, contiguous gradients.
- torchtitan: fsdp2 layout with reduce_dtype fp32, the model and the loss compiled; none /
  selective = op-level SAC / full; sequence parallel with TP; no resharding after forward
  under PP; float8 tensorwise with fp8 all-gather; 1F1B; HSDP replicates across nodes.

A ``bf16`` plan is sized as ``bf16-mixed`` on every stack: each renders it as bf16 compute over
fp32 weights and optimizer states, none keeps pure-bf16 states. torchtitan has no fp16 mixed
precision (its config would train in fp32): it is not offered for ``fp16-mixed``.
torchtitan renders ``model.name = "llama3"``: it is proposed for dense llama-family models only.
A stack slug this table does not know is sized in the estimator's defaults (autocast, eager),
with every checkpointing value taken as the estimator reads it.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from portal.sizing.estimator import ModelSpec
from portal.sizing.estimator.config import FSDP_SHARDING, WEIGHT_SHARDING, ZeroConfig

# provisioning/stack/adapters.py's LoraConfig: target_modules by the estimator's family (Phi-3's
# fused module names by its model type), lora_dropout
LORA_TARGETS = {"llama": ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"),
                "phi3": ("qkv_proj", "o_proj", "gate_up_proj", "down_proj"),  # fused_projections
                "gpt2": ("c_attn", "c_proj", "c_fc"), "bert": ("query", "key", "value", "dense")}
LORA_DROPOUT = 0.05


def layer_lora_targets(family: str, model_type: str = "") -> tuple[str, ...]:
    """Every linear of a layer by the model's own module names: its model type's where that names
    them otherwise (Phi-3's fused ones), else its family's (llama's for a family not listed)."""
    return LORA_TARGETS.get(model_type) or LORA_TARGETS.get(family, LORA_TARGETS["llama"])


def lora_targets_for(model: ModelSpec) -> tuple[str, ...]:
    """layer_lora_targets of a spec; a spec that fuses its projections names Phi-3's modules."""
    return layer_lora_targets(model.family, "phi3" if model.fused_projections else model.model_type)


@dataclass(frozen=True)
class StackRegime:
    """The estimator knobs one stack's rendered config fixes."""

    slug: str
    # plan checkpointing value -> the estimator's policy; only these values are offered
    checkpointing: tuple[tuple[str, str], ...] = (
        ("none", "none"), ("selective", "selective"), ("full", "full"))
    fsdp_layout: str | None = None  # mixed_layout under FSDP sharding ("fsdp2": FSDP2's MixedPrecisionPolicy)
    fsdp_reduce_dtype: str = "fp32"
    compile: bool = False  # torch.compile of the model (and, with compile_loss, of the loss)
    compile_loss: bool = False
    sp_with_tp: bool = False  # sequence parallel whenever tensor parallel
    reshard_with_pp: bool = True  # FSDP reshards after forward under pipeline parallelism
    float8_all_gather: bool = False  # fp8 plans: FSDP2 all-gathers float8 weights (tensorwise)
    fused_attention: bool = False  # the stack's model always runs SDPA/flash attention
    deepspeed_buckets: bool = False  # ZeRO buckets sized from the hidden size (DeepSpeed's "auto")
    dense_llama_only: bool = False  # the stack's model code is a dense llama (torchtitan's llama3)
    pp_schedule: str = "1f1b"  # the pipeline schedule its config names (torchtitan renders 1F1B)
    # its training loop accumulates micro-batches inside FSDP's no_sync (ParallelConfig.fsdp_no_sync)
    no_sync_accumulation: bool = False
    # QLoRA with sharded weights: the stack renders bnb_4bit_quant_storage as the half type
    # (provisioning/stack/adapters.py), so FSDP and ZeRO-3 shard the 4-bit weights
    qlora_half_storage: bool = False
    renders_adapters: bool = False  # LoRA/QLoRA plans run adapters.json's LoraConfig (adapter_knobs)
    # plan precision -> the precision the rendered config trains in; a precision not listed is
    # run as it is named; one mapped to None is not offered
    precisions: tuple[tuple[str, str | None], ...] = ()

    def runs(self, model: ModelSpec, precision: str = "bf16-mixed") -> bool:
        """Whether the stack's config can train this model at this precision at all."""
        if self.precision(precision) is None:
            return False
        return not self.dense_llama_only or model.llama_layer

    def precision(self, precision: str) -> str | None:
        """The precision a plan of this precision trains in under this stack (None: not offered)."""
        return dict(self.precisions).get(precision, precision)

    def policy(self, checkpointing: str, model: ModelSpec) -> str | None:
        """The estimator policy a plan's checkpointing value runs under this stack (None: not
        offered: the stack has no such mode, or the estimator cannot represent it here)."""
        return _policy(self, checkpointing, model.family, model.is_moe)

    def training_knobs(self, checkpointing: str, model: ModelSpec, attention: str,
                       precision: str) -> dict[str, Any]:
        """TrainingConfig overrides for a plan of this stack (beyond the workload's own settings)."""
        out: dict[str, Any] = {}
        if (runs_in := self.precision(precision)) not in (None, precision):
            out["precision"] = runs_in
        policy = self.policy(checkpointing, model)
        if policy is not None and policy != checkpointing:
            out["checkpointing"] = policy
        if self.compile:
            out["compile"] = True
        if self.compile_loss:
            out["compile_loss"] = True
        if self.fused_attention and attention == "eager":
            out["attention"] = "sdpa"
        if self.float8_all_gather and precision == "fp8":
            out["float8_all_gather"] = True
        return out

    def layout_knobs(self, sharding: str, precision: str, finetune: str = "full") -> dict[str, Any]:
        """TrainingConfig overrides that depend on the data-parallel kind."""
        out: dict[str, Any] = {}
        if finetune == "qlora" and self.qlora_half_storage and sharding in WEIGHT_SHARDING:
            out["quant_storage"] = "fp16" if precision == "fp16-mixed" else "bf16"
        precision = self.precision(precision) or precision
        if sharding in FSDP_SHARDING and self.fsdp_layout and precision in ("bf16-mixed", "fp8"):
            out["mixed_layout"] = self.fsdp_layout
        return out

    def adapter_knobs(self, model: ModelSpec, finetune: str) -> dict[str, Any]:
        """TrainingConfig overrides of a LoRA/QLoRA plan: the adapters the stack renders."""
        if finetune == "full" or not self.renders_adapters:
            return {}
        return {"lora_targets": lora_targets_for(model), "lora_dropout": LORA_DROPOUT}

    def replicated_tp(self, tp: int) -> int:
        """ParallelConfig.replicated_tp of this stack's layouts at TP width tp."""
        return 1 if self.sp_with_tp else tp

    def parallel_knobs(self, *, sharding: str, tp: int, pp: int, dp: int, nodes: int,
                       model: ModelSpec, offload: str = "none") -> dict[str, Any]:
        """ParallelConfig overrides for a layout of this stack."""
        out: dict[str, Any] = {}
        if self.no_sync_accumulation and sharding in FSDP_SHARDING and offload == "none":
            out["fsdp_no_sync"] = True
        if self.sp_with_tp and tp > 1:
            out["sp"] = True
        if pp > 1 and not self.reshard_with_pp and sharding in FSDP_SHARDING:
            out["reshard_after_forward"] = False
        if pp > 1 and self.pp_schedule != "1f1b":
            out["pp_schedule"] = self.pp_schedule
        if sharding in FSDP_SHARDING and self.fsdp_layout and self.fsdp_reduce_dtype != "fp32":
            out["fsdp_reduce_dtype"] = self.fsdp_reduce_dtype
        if sharding == "fsdp-hybrid":  # both stacks shard within a node and replicate across nodes
            out["hybrid_shard_size"] = max(1, dp // nodes)
        if self.deepspeed_buckets and sharding in ("zero1", "zero2", "zero3"):
            h = model.hidden_size
            out["zero"] = ZeroConfig(reduce_bucket_size=h * h, overlap_comm=True,
                                     contiguous_gradients=True, prefetch_bucket_size=int(0.9 * h * h),
                                     param_persistence_threshold=10 * h)
        return out


@lru_cache(maxsize=256)
def _policy(regime: StackRegime, checkpointing: str, family: str, moe: bool) -> str | None:
    policy = next((est for plan, est in regime.checkpointing if plan == checkpointing), None)
    if policy == "selective-op" and (family != "llama" or moe):
        return None  # torchtitan's op SAC counts dense llama blocks' aten.mm calls
    return policy


HF_CHECKPOINTING = (("none", "none"), ("full", "full"))
# Every stack's config trains a "bf16" plan in bf16 mixed precision over fp32 weights and optimizer
# states (Accelerate mixed_precision bf16, DeepSpeed bf16.enabled, torchtitan
# mixed_precision_param bfloat16, AMP under torchrun): none keeps pure-bf16 states.
BF16_AS_MIXED = (("bf16", "bf16-mixed"),)
REGIMES: dict[str, StackRegime] = {
    "ddp": StackRegime("ddp", checkpointing=HF_CHECKPOINTING, precisions=BF16_AS_MIXED,
                       qlora_half_storage=True, renders_adapters=True),
    "fsdp": StackRegime("fsdp", checkpointing=HF_CHECKPOINTING, fsdp_layout="fsdp2",
                        fsdp_reduce_dtype="bf16", precisions=BF16_AS_MIXED, qlora_half_storage=True,
                        renders_adapters=True, no_sync_accumulation=True),
    "deepspeed": StackRegime("deepspeed", checkpointing=HF_CHECKPOINTING, deepspeed_buckets=True,
                             precisions=BF16_AS_MIXED, qlora_half_storage=True, renders_adapters=True),
    # torchtitan has no fp16 mixed precision (its config would train in fp32): not offered
    "torchtitan": StackRegime(
        "torchtitan", checkpointing=(("none", "none"), ("selective", "selective-op"), ("full", "full")),
        fsdp_layout="fsdp2", fsdp_reduce_dtype="fp32", compile=True, compile_loss=True, sp_with_tp=True,
        reshard_with_pp=False, float8_all_gather=True, fused_attention=True, dense_llama_only=True,
        precisions=(*BF16_AS_MIXED, ("fp16-mixed", None)), qlora_half_storage=True, renders_adapters=True),
}
DEFAULT_REGIME = StackRegime("")


def regime_of(slug: str) -> StackRegime:
    return REGIMES.get(slug, DEFAULT_REGIME)
