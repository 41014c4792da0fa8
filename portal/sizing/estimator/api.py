"""The public entry point: estimate(model, training, parallel, gpu, interconnect, tokens)."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field, fields, replace
from functools import cached_property, lru_cache

from . import activations as act
from . import checkpoint as ckpt
from . import compute as cmp
from . import memory as mem
from .config import (
    DORA_TP_REFUSAL,
    PAGED_OPTIMIZERS,
    GPUSpec,
    HostSpec,
    Interconnect,
    ParallelConfig,
    TrainingConfig,
)
from .models import (
    FUSED_MODULES,
    ModelSpec,
    ParamCounts,
    arch_scale,
    count_params,
    layer_params,
    param_tensors,
)

DEFAULT_LINK = Interconnect()  # estimate()'s link when none is given (8 GPUs per node)
DEFAULT_HOST = HostSpec()  # the node's CPU side when none is given (config.HostSpec)
# The version of the memory and time model (docs/sizing.md): 1 until issue 33; 2 adds NCCL's
# latencies, TP-narrowed matmuls, ring attention's own costs, the host CPU's optimizer step,
# sharded 4-bit QLoRA weights and framework-specific overlap; 3 times attention at its kernel's
# own rate (compute.attention_slowdown: step times only, no bytes); 4 sizes LoRA/QLoRA
# activations as autograd saves them under a frozen base, with the adapters' dropout copies
# (activations.adapted_linears; bytes of LoRA/QLoRA plans only). A stored plan carries the
# version that sized it: one sized by an older version may re-estimate to other bytes or times.
# 5 keeps QLoRA's quantisation state on the GPU under parameter offload (memory.
# offload_resident_weight_bytes; bytes of QLoRA plans with offload="optimizer+params" only).
# 6 slows the compute under hidden communication (compute.OVERLAP_SLOWDOWN: step times only).
# 7 holds bitsandbytes' dequantised 4-bit weight at its matmul (act.bnb_dequantised; bytes of
# QLoRA plans on bitsandbytes only). 8 times an SDPA step's attention on Hopper at cuDNN's rate,
# the kernel the stacks' torch picks there (compute.attention_kernel: step times only, no bytes).
# 9 sizes an adapter on the output head (lm_head in lora_targets), which versions up to 8 left out
# without a word (activations.head_adapter; bytes of LoRA/QLoRA plans naming lm_head only), and
# holds a compiled loss's logits gradient in the logits' dtype (fp32 runs: 4 B, not 2). 10 keeps
# eager attention's repeated v (and k without autocast) once for a single kv head at micro-batch 1,
# where they are views (activations._attention_core; bytes of such eager plans only), and sizes
# Qwen3's per-head q/k norms (activations.qk_norms) and Phi-3's fused projections with the head
# merge its rotary forces (activations.phi3_head_merge_copy): model types no earlier version read.
# 11 runs sliding-window attention as transformers does (config.json's sliding_window: Mistral,
# Phi-3-mini, Mixtral and Qwen with a window): under SDPA, from the window's length on, each
# sliding layer keeps a mask and repeated k and v (activations.sliding_window_masks; bytes) and
# computes the whole square (compute.attention_layers; times); FlashAttention-2 attends within the
# window (times). It also sizes Gemma and Gemma 3 (unit-offset and post-norms), new model types, and
# keeps in a LoRA plan's first MLP only what its adapters' gradients need where no attention linear
# is adapted (activations.first_mlp_unsaved; bytes of LoRA on part of the MLP only). 12 sizes
# Gemma 2, a new model type: its soft-capped scores and logits keep tanh's output (bytes) and move
# more through eager kernels (compute.SOFTCAP_BYTES; times); selective-op recompute refuses Gemma's
# norms, which its policy does not count (no stack renders it for them). It also counts the half
# casts of frozen weights a LoRA plan keeps under autocast (activations.frozen_weight_casts; bytes
# of LoRA plans in the autocast layout, the ddp stack's) and o_proj's adapter's own copy of its
# input there (PEFT casts it to the fp32 adapter: activations.o_proj_input_copied), keeps in a LoRA
# plan's first eager attention only what its adapters' gradients need
# (activations.first_eager_attention_unsaved), and sizes DoRA (use_dora, a new knob: dora_saved).
# 13 times DoRA: its weight norm at every forward and its output scaling as memory-bound traffic
# (compute.dora_bytes_per_microbatch), the frozen matmul it runs again under LoRA dropout
# (compute.dora_dropout_flops_per_token); times of DoRA plans only. It refuses DoRA under tensor
# parallelism, which PEFT refuses, and under op-level recompute, which it does not count.
ESTIMATOR_VERSION = 13


@dataclass(frozen=True)
class MemoryBreakdown:
    """Peak bytes on the busiest GPU. total is the sum of every other field."""

    weights: int
    gradients: int
    optimizer_states: int
    activations: int
    logits_and_loss: int
    transient: int
    gathered_buffers: int
    framework_overhead: int
    total: int


@dataclass(frozen=True)
class ComputeEstimate:
    model_flops_per_token: float
    hardware_flops_per_token: float
    tokens_per_step: int
    compute_seconds: float
    comm_bytes: dict
    comm_seconds: dict
    exposed_comm_seconds: float
    bubble_fraction: float
    step_seconds: float
    tokens_per_second: float
    mfu: float
    train_tokens: float | None
    time_to_train_seconds: float | None
    # part of compute_seconds: memory-bound attention scores and loss (compute.memory_bound_seconds)
    # and DoRA's traffic (compute.dora_seconds)
    memory_bound_seconds: float = 0.0
    # part of comm_seconds: NCCL's latency of the collectives launched, per kind (compute.latency_seconds)
    comm_latency_seconds: dict = field(default_factory=dict)


@dataclass(frozen=True)
class CheckpointSize:
    model_only_bytes: int
    full_state_bytes: int


@dataclass(frozen=True)
class Estimate:
    model: str
    params: ParamCounts
    per_gpu: MemoryBreakdown
    cpu_bytes: int  # host RAM per node for offloaded state
    fits: bool | None  # None without a GPU
    layout: str
    compute: ComputeEstimate | None
    checkpoint: CheckpointSize
    world_size: int
    memory: MemoryEstimate | None = field(default=None, repr=False, compare=False)  # what it was built from

    @cached_property
    def represents(self) -> tuple[str, ...]:
        """The regime modelled, knob by knob (MemoryEstimate.represents)."""
        return self.memory.represents if self.memory is not None else ()

    @cached_property
    def unmodelled(self) -> tuple[str, ...]:
        """Settings of this setup the estimate cannot represent and approximates (empty: none)."""
        if self.memory is None:
            return ()
        if self.fits is False and self.memory.outside_allocator_bytes:
            return (*self.memory.unmodelled, "a paged optimizer on a GPU it does not fit: bitsandbytes pages"
                    " its states to host RAM, and neither that spill nor its PCIe traffic is modelled")
        return self.memory.unmodelled

    def to_dict(self) -> dict:
        d = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "memory"}
        d = {k: asdict(v) if hasattr(v, "__dataclass_fields__") else v for k, v in d.items()}
        d["per_gpu_bytes"] = d.pop("per_gpu")
        d["represents"], d["unmodelled"] = list(self.represents), list(self.unmodelled)
        return d


def _frozen(cls, **values):
    """An instance of frozen dataclass cls with every field given, built without the generated
    __init__ (which sets each field through object.__setattr__: a third of the cost of an
    estimate in the recommender's inner loop). Same object as cls(**values)."""
    obj = object.__new__(cls)
    obj.__dict__.update(values)
    assert len(values) == len(cls.__dataclass_fields__), (cls.__name__, sorted(values))
    return obj


def validate(model: ModelSpec, training: TrainingConfig, parallel: ParallelConfig) -> None:
    tp = parallel.tp
    if model.num_heads % tp:
        raise ValueError(f"tp={tp} does not divide {model.num_heads} attention heads")
    if model.num_kv_heads % tp and tp % model.num_kv_heads:
        raise ValueError(f"tp={tp} does not divide {model.num_kv_heads} key/value heads")
    if model.intermediate_size % tp:
        raise ValueError(f"tp={tp} does not divide the MLP width {model.intermediate_size}")
    if parallel.pp > model.num_layers:
        raise ValueError(f"pp={parallel.pp} is more than the model's {model.num_layers} layers")
    if parallel.ep > 1 and not model.is_moe:
        raise ValueError("expert parallelism (ep > 1) needs a mixture-of-experts model")
    if model.is_moe and model.num_experts % parallel.ep:
        raise ValueError(f"ep={parallel.ep} does not divide {model.num_experts} experts")
    learned = model.family in ("gpt2", "bert")
    if learned and training.seq_len > model.max_position_embeddings:
        raise ValueError(
            f"seq_len={training.seq_len} exceeds the {model.max_position_embeddings} learned"
            f" positions of {model.name}"
        )
    if training.finetune != "full" and training.optimizer == "adafactor":
        pass  # allowed
    if training.mixed_layout == "fsdp2" and parallel.sharding not in mem.FSDP_SHARDING:
        raise ValueError("mixed_layout='fsdp2' is FSDP2's MixedPrecisionPolicy: use an fsdp-* sharding")
    if training.checkpointing == "selective-op" and not model.llama_layer:
        raise ValueError("selective-op checkpointing is modelled for the dense llama family's own layer"
                         " (torchtitan's policy counts the aten.mm calls of Llama's seven linears), not"
                         " for experts, fused projections, q/k norms or Gemma's norms; use full or selective")
    if training.use_dora:
        _validate_dora(model, training, parallel)
    if not model.runs_sdpa and training.attention == "sdpa":
        raise ValueError("transformers has no SDPA path for Gemma 2 (its soft-capped attention scores): it"
                         " runs it in eager attention (its default for the model) or FlashAttention-2; use"
                         " attention='eager' or 'flash'")
    if training.precision == "fp8" and training.finetune == "qlora":
        raise ValueError("qlora trains in bf16 on top of NF4 weights; use bf16-mixed")
    if training.nf4_quantizer == "lightning":
        _validate_lightning_nf4(model, training, parallel)
    cp = parallel.cp
    if cp > 1 and training.attention == "eager":
        raise ValueError("context parallelism runs ring attention on the fused kernel; use attention='sdpa'"
                         " or 'flash'")
    if cp > 1 and training.seq_len % (2 * cp):
        raise ValueError(f"seq_len={training.seq_len} must split into 2 x cp={cp} equal chunks for context"
                         " parallelism (load-balanced ring attention)")
    if model.implementation == "trainyard-smoke":
        _validate_smoke(training, parallel)


def attention_for(model: ModelSpec, attention: str) -> str:
    """The attention a Hugging Face model runs when asked for this one without naming its
    implementation: transformers has no SDPA path for Gemma 2 (ModelSpec.runs_sdpa) and picks eager
    for it instead; every other ask runs as asked."""
    return "eager" if not model.runs_sdpa and attention == "sdpa" else attention


def _validate_dora(model: ModelSpec, training: TrainingConfig, parallel: ParallelConfig) -> None:
    if act.adapted_linears(model, training) is None:  # what dora_saved counts
        raise ValueError("use_dora (PEFT's DoRA) is modelled on the dense llama family's linears (Llama,"
                         " Mistral, Qwen, Phi-3, Gemma), not on experts, GPT-2 or BERT")
    if parallel.tp > 1:
        raise ValueError(f"{DORA_TP_REFUSAL}: use tp=1")
    if training.checkpointing == "selective-op":
        raise ValueError("DoRA's ops are not counted under op-level recompute (torchtitan's SAC, which"
                         " runs no PEFT adapters); use full or selective checkpointing")


def _validate_lightning_nf4(model: ModelSpec, training: TrainingConfig, parallel: ParallelConfig) -> None:
    """Lightning's BitsandbytesPrecision as litgpt runs it: one device (litgpt refuses quantisation
    on more), a true dtype (the plugin replaces the precision: litgpt refuses mixed precision
    with it), an untied head (litgpt ties none; the conversion would clone a tied one into a
    4-bit weight of its own, which is not modelled)."""
    if parallel.world_size > 1 or parallel.offload != "none":
        raise ValueError("nf4_quantizer='lightning' is modelled on one GPU without offload, as litgpt runs"
                         " it (it refuses bitsandbytes quantisation on more than one device)")
    if training.precision not in ("bf16", "fp32"):
        raise ValueError("nf4_quantizer='lightning' computes in a true dtype (BitsandbytesPrecision"
                         " replaces the precision): use precision 'bf16' or 'fp32'")
    if model.tie_word_embeddings:
        raise ValueError("nf4_quantizer='lightning' is modelled with an untied output head, as litgpt runs"
                         " it: this model ties its head to the embedding")


def _validate_smoke(training: TrainingConfig, parallel: ParallelConfig) -> None:
    """What the Trainyard smoke model (train_smoke.py) and its loops can run: SDPA, whole-block
    checkpointing or none, a full fine-tune with a plain cross-entropy, no model parallelism."""
    unsupported = []
    if training.attention == "eager":
        unsupported.append("attention='eager' (it always calls SDPA)")
    if training.checkpointing not in ("none", "full") or training.checkpoint_every > 1:
        unsupported.append(f"checkpointing={training.checkpointing!r} (it checkpoints every block or none)")
    if training.finetune != "full":
        unsupported.append(f"finetune={training.finetune!r}")
    if training.loss != "full" or training.compile or training.compile_loss:
        unsupported.append("a chunked, fused or compiled loss or torch.compile")
    if training.optimizer_in_backward or training.activation_offload:
        unsupported.append("optimizer_in_backward / activation_offload")
    if parallel.tp > 1 or parallel.pp > 1 or parallel.cp > 1 or parallel.ep > 1:
        unsupported.append("tensor, pipeline, context or expert parallelism")
    if unsupported:
        raise ValueError("the Trainyard smoke model (implementation='trainyard-smoke') does not run "
                         + "; ".join(unsupported))


@dataclass(frozen=True)
class StepFacts:
    """The GPU- and link-independent half of the compute estimate of one setup."""

    model_flops_per_token: float
    hardware_flops_per_token: float
    tokens_per_gpu_group: int  # tokens one model-parallel group processes per optimizer step
    tokens_per_step: int
    model_parallel: int  # tp * pp * cp
    bubble_fraction: float
    comm_bytes: dict  # bytes each GPU sends per step, by kind
    dp_forward_share: float = 0.0  # share of the dp traffic in the forward pass
    shard_elems: float = 0.0  # trainable elements whose optimizer step this GPU runs
    gathered_shard_elems: float = 0.0  # elements of this GPU's weight shard (offloaded weights)
    comm_calls: dict = field(default_factory=dict)  # collectives launched per step (compute.collective_calls)
    attention_flops_per_token: float = 0.0  # part of the hardware FLOPs: attention scores


@dataclass(frozen=True)
class MemoryEstimate:
    """Everything that depends only on (model, training, parallel): per-GPU memory, host RAM
    for offloaded state, parameter counts and checkpoint sizes.

    It does not depend on the GPU model or the links, so one MemoryEstimate serves every GPU:
    ``estimate_compute(memory, gpu, interconnect)`` adds the step time and
    ``estimate_from_memory(memory, gpu, interconnect)`` the whole ``Estimate``.
    """

    model: str
    params: ParamCounts
    per_gpu: MemoryBreakdown
    cpu_bytes_per_gpu: float  # offloaded state each rank keeps in host RAM
    layout: str
    checkpoint: CheckpointSize
    world_size: int
    spec: ModelSpec = field(repr=False, compare=False)
    training: TrainingConfig = field(repr=False, compare=False)
    parallel: ParallelConfig = field(repr=False, compare=False)

    def cpu_bytes_per_node(self, gpus_per_node: int = DEFAULT_LINK.gpus_per_node) -> int:
        """Host RAM per node for offloaded state (the ranks of one node)."""
        return int(self.cpu_bytes_per_gpu * min(self.world_size, gpus_per_node))

    def fits(self, gpu: GPUSpec) -> bool:
        return self.per_gpu.total <= gpu.memory_bytes

    @cached_property
    def outside_allocator_bytes(self) -> int:
        """Of the per-GPU total, what PyTorch's caching allocator does not hold (so
        torch.cuda.max_memory_allocated does not count it): a paged optimizer's states, which
        bitsandbytes allocates in CUDA unified memory for tensors of 1e5 elements and more
        (memory.paged_state_bytes)."""
        return mem.paged_state_bytes(self.spec, self.training, self.parallel, self.per_gpu.optimizer_states)

    @cached_property
    def represents(self) -> tuple[str, ...]:
        """The regime this estimate models, knob by knob."""
        knobs = represented_knobs(self.training, self.parallel, self.layout)
        if self.spec.implementation != "hf":
            knobs += (f"model code={self.spec.implementation}",)
        return knobs

    @cached_property
    def unmodelled(self) -> tuple[str, ...]:
        """Settings of this setup the estimate cannot represent and approximates (empty: none)."""
        return unmodelled_knobs(self.spec, self.training, self.parallel, self.layout)

    @cached_property
    def step(self) -> StepFacts:
        """GPU-independent compute facts, worked out on first use (then kept)."""
        return _step_facts(self.spec, self.training, self.parallel, self.layout)

    def to_dict(self) -> dict:
        return {
            "model": self.model, "params": asdict(self.params), "per_gpu_bytes": asdict(self.per_gpu),
            "cpu_bytes_per_gpu": int(self.cpu_bytes_per_gpu), "layout": self.layout,
            "checkpoint": asdict(self.checkpoint), "world_size": self.world_size,
            "represents": list(self.represents), "unmodelled": list(self.unmodelled),
        }


def represented_knobs(training: TrainingConfig, parallel: ParallelConfig, layout: str) -> tuple[str, ...]:
    """The regime modelled, knob by knob: the training side, then the parallel layout."""
    return (*_training_knobs(training, parallel, layout), *_parallel_knobs(training, parallel, layout))


def _training_knobs(training: TrainingConfig, parallel: ParallelConfig, layout: str) -> list[str]:
    out = [f"precision={training.precision}", f"layout={layout}", f"optimizer={training.optimizer}",
           f"checkpointing={training.checkpointing}", f"attention={training.attention}",
           f"loss={training.loss}", f"stack={training.kernel_stack}"]
    if training.checkpoint_every > 1:
        out.append(f"checkpoint_every={training.checkpoint_every}")
    for flag in ("compile", "compile_loss", "optimizer_in_backward", "activation_offload"):
        if getattr(training, flag):
            out.append(flag)
    if training.precision == "fp8":
        gather = " +fp8 all-gather" if training.float8_all_gather else ""
        out.append(f"float8={training.float8_recipe}{gather}")
    if training.finetune != "full":
        out.append(f"finetune={training.finetune} r={training.lora_rank}"
                   + (f" lora_dropout={training.lora_dropout:g}" if training.lora_dropout else "")
                   + (" DoRA" if training.use_dora else "") + (" +head" if training.adapts_head else ""))
    if training.finetune == "qlora":
        out.append(f"quant_storage={mem.nf4_storage(training, parallel)}")
        if not training.nf4_double_quant:
            out.append("nf4 without double quantisation (fp32 absmax)")
        if training.nf4_quantizer != "transformers":
            out.append(f"nf4_quantizer={training.nf4_quantizer}")
        if training.bnb_version != "current":
            out.append(f"bitsandbytes{training.bnb_version}")
    if training.optimizer in PAGED_OPTIMIZERS and parallel.offload == "none":
        out.append(f"paged states ({PAGED_OPTIMIZERS[training.optimizer]}'s) resident on the GPU in unified"
                   " memory, outside PyTorch's allocator")
    if training.optimizer_impl != "default":
        out.append(f"optimizer_impl={training.optimizer_impl}")
    return out


def _parallel_knobs(training: TrainingConfig, parallel: ParallelConfig, layout: str) -> list[str]:
    out = [f"sharding={parallel.sharding}" + (f" offload={parallel.offload}" if parallel.offload != "none"
                                                   else "")]
    if parallel.sharding == "fsdp-hybrid":
        out.append(f"hsdp shard={mem.shard_group(parallel)}")
    if layout == "fsdp2":
        out.append(f"fsdp reduce_dtype={parallel.fsdp_reduce_dtype}")
        if not parallel.reshard_after_forward:
            out.append("reshard_after_forward=False")
    if parallel.fsdp_no_sync:
        out.append("fsdp no_sync")
    if parallel.sharding in mem.DEEPSPEED_SHARDING:
        z = parallel.zero
        stage = int(parallel.sharding[-1])
        out.append(f"zero reduce_bucket={z.reduce_bucket_size:.3g} overlap_comm={z.overlaps(stage)}"
                   f" grad_accum_dtype={z.grad_accum_dtype or 'model'}")
        if stage == 3:
            out.append(f"zero3 prefetch={z.prefetch_bucket_size:.3g} max_live={z.max_live_parameters:.3g}"
                       f" max_reuse={z.max_reuse_distance:.3g} persist<{z.param_persistence_threshold:.3g}"
                       f" sub_group={z.sub_group_size:.3g}")
    if parallel.pp > 1:
        schedule = {"1f1b": "1F1B", "zb-h1": "ZB-H1"}[parallel.pp_schedule]
        out.append(f"pp={parallel.pp} {schedule}" + (f" interleave={parallel.pp_interleave}"
                                                     if parallel.pp_interleave > 1 else ""))
    if parallel.tp > 1:
        out.append(f"tp={parallel.tp}" + (" +sp" if parallel.sp else "")
                   + (" async" if parallel.async_tp else ""))
    if parallel.cp > 1:
        out.append(f"cp={parallel.cp} ring attention")
    if parallel.ep > 1:
        out.append(f"ep={parallel.ep}")
    out.append("gradients freed between steps" if mem.grads_freed_between_steps(training, parallel)
               else "gradients resident across steps")
    return out


def unmodelled_knobs(model: ModelSpec, training: TrainingConfig, parallel: ParallelConfig,
                     layout: str) -> tuple[str, ...]:
    """What of this setup no knob represents: the estimate approximates it (and says so)."""
    out = []
    if parallel.cp > 1 and parallel.sharding not in mem.FSDP_SHARDING:
        out.append("context parallelism without FSDP (modelled as torchtitan runs it: FSDP over dp x cp)")
    if (training.finetune == "qlora" and parallel.sharding == "zero3"
            and mem.nf4_storage(training, parallel) == "uint8"):
        out.append("QLoRA's NF4 weights in uint8 storage under ZeRO-3 (store them in the half dtype:"
                   " quant_storage)")
    if training.precision == "fp8" and training.float8_recipe == "rowwise" and parallel.tp > 1:
        out.append("float8 rowwise under tensor parallelism: torchtitan measured it at or below bf16 speed"
                   " with vanilla TP (pytorch/torchtitan#1207, benchmarks/asyncTP_llama3_h100_2025-06); the"
                   " float8 speed-up the time model gives is not what runs")
    if parallel.offload == "optimizer" and parallel.sharding in mem.FSDP_SHARDING:
        out.append("FSDP offloading the optimizer alone (FSDP's CPU offload moves parameters, gradients and"
                   " optimizer together: offload='optimizer+params')")
    if layout == "fsdp2" and parallel.sharding == "fsdp-shard-grad-op":
        out.append("fsdp-shard-grad-op under FSDP2 (it is fsdp-full-shard with reshard_after_forward=False)")
    if training.compile and model.family != "llama":
        out.append(f"torch.compile fusions of {model.family} layers (memory counted as eager)")
    if parallel.pp_schedule == "zb-h1" and parallel.pp_interleave > 1:
        out.append("interleaved zero-bubble pipeline schedules")
    if training.activation_offload and parallel.pp > 1:
        out.append("activation offloading under pipeline parallelism")
    torchtitan_only = parallel.cp > 1 or training.compile or training.checkpointing == "selective-op"
    if model.sliding_layers and torchtitan_only:
        out.append("sliding-window attention layers under context parallelism, torch.compile or op-level"
                   " recompute: timed and sized as the Hugging Face layers run in eager mode")
    return tuple(out)


def estimate(
    model: ModelSpec,
    training: TrainingConfig | None = None,
    parallel: ParallelConfig | None = None,
    gpu: GPUSpec | None = None,
    interconnect: Interconnect | None = None,
    train_tokens: float | None = None,
    *,
    host: HostSpec | None = None,
) -> Estimate:
    """Memory (estimate_memory) and, with a GPU, step time (estimate_compute) of one setup."""
    return estimate_from_memory(estimate_memory(model, training, parallel), gpu, interconnect, train_tokens,
                                host=host)


def own_linear_names(model: ModelSpec, training: TrainingConfig) -> TrainingConfig:
    """LoRA targets in the model's own module names: on a model that fuses q/k/v (Phi-3), the
    whole set q_proj, k_proj, v_proj is its qkv_proj (the default targets among them), and
    gate_proj with up_proj its gate_up_proj; a part of a set is left as named and refused
    (memory._lora_tensors), as PEFT cannot adapt part of a fused linear."""
    if not model.fused_projections or training.finetune == "full":
        return training
    targets = list(training.lora_targets)
    for fused, split in FUSED_MODULES.items():
        if set(split) <= set(targets):
            targets = [t for t in targets if t not in split] + [fused]
    if tuple(targets) == training.lora_targets:
        return training
    return replace(training, lora_targets=tuple(targets))


def estimate_memory(
    model: ModelSpec,
    training: TrainingConfig | None = None,
    parallel: ParallelConfig | None = None,
) -> MemoryEstimate:
    """Per-GPU memory of one setup; independent of the GPU model and the interconnect."""
    training = own_linear_names(model, training or TrainingConfig())
    parallel = parallel or ParallelConfig()
    validate(model, training, parallel)
    p, weights, grads, optim, cpu_per_gpu, gathered, step_extra, params, checkpoint = _model_states(
        model, training.precision, training.mixed_layout, training.optimizer_kind, training.finetune,
        training.lora_rank, training.lora_targets, training.float8_all_gather, parallel,
        training.quant_storage if training.finetune == "qlora" else "auto",
        training.nf4_double_quant or training.finetune != "qlora", training.nf4_quantizer, training.use_dora)
    if mem.accumulates_unsharded(training, parallel):
        grads = mem.unsharded_gradient_bytes(model, training, parallel, p)
    gathered += act.frozen_weight_casts(model, training, parallel, p.layout, p.shard_weights)
    activations, logits, backward, offloaded, held = _activations(
        model, training, parallel.tp, parallel.sp, parallel.pp, parallel.pp_microbatches, p.layout,
        parallel.cp, parallel.pp_interleave)
    cpu_per_gpu += offloaded
    forward_backward = activations + logits + backward
    # held: logits the training loop keeps until the step returns (in logits, and at the step)
    if training.optimizer_in_backward:
        # each gradient is freed right after its parameter's step: no step moment
        grads = mem.largest_gradient_bytes(model, training, parallel, p)
        peak = grads + forward_backward
    elif mem.grads_freed_between_steps(training, parallel):
        # backward turns activations into gradients; the step holds gradients, not activations
        peak = max(forward_backward, grads + step_extra + held)
    else:
        peak = grads + max(forward_backward, step_extra + held)
    # transient = what the peak moment holds beyond the listed terms; negative when gradients
    # are not resident at the peak (freed by zero_grad before the forward)
    transient = peak - grads - activations - logits
    allocated = weights + grads + optim + activations + logits + transient + gathered
    # the allocator's overhead grows with what it holds, not with a paged optimizer's states
    outside = mem.paged_state_bytes(model, training, parallel, int(optim))
    overhead = mem.framework_overhead_bytes(allocated - outside, parallel.world_size)
    w, g, o, a, lg, t, gb, fo = (int(weights), int(grads), int(optim), int(activations), int(logits),
                                 int(transient), int(gathered), int(overhead))
    per_gpu = _frozen(MemoryBreakdown, weights=w, gradients=g, optimizer_states=o, activations=a,
                      logits_and_loss=lg, transient=t, gathered_buffers=gb, framework_overhead=fo,
                      total=w + g + o + a + lg + t + gb + fo)
    memory = _frozen(
        MemoryEstimate,
        model=model.name,
        params=params,
        per_gpu=per_gpu,
        cpu_bytes_per_gpu=cpu_per_gpu,
        layout=p.layout,
        checkpoint=checkpoint,
        world_size=parallel.world_size,
        spec=model,
        training=training,
        parallel=parallel,
    )
    # worked out now (cheap), so a search that filters on it pays no cached_property lookup
    memory.__dict__["unmodelled"] = unmodelled_knobs(model, training, parallel, p.layout)
    return memory


@lru_cache(maxsize=8192)
def _activations(model: ModelSpec, training: TrainingConfig, tp: int, sp: bool, pp: int,
                 pp_microbatches: int | None, layout: str, cp: int = 1,
                 pp_interleave: int = 1) -> tuple[int, int, int, int, int]:
    """(saved activations, logits and loss, backward transient, offloaded to host, logits the
    training loop keeps until the step, part of logits and loss): they
    depend on the training settings and on TP/SP/PP/CP, not on data parallelism or sharding
    (only through the dtype layout). Cached, so strategies that share a layout share them.

    Context parallelism splits every sequence over cp ranks: each keeps the activations and
    logits of its s/cp tokens, and ring attention gathers the whole sequence's k and v (and in
    backward their gradients) for one layer at a time."""
    pp_interleave = pp_interleave if pp > 1 else 1
    parallel = ParallelConfig(tp=tp, sp=sp, pp=pp, pp_microbatches=pp_microbatches,
                              pp_interleave=pp_interleave)
    local = training if cp == 1 else replace(training, seq_len=training.seq_len // cp)
    dt = act.dtype_facts(training, layout)
    layers_per_stage = math.ceil(model.num_layers / pp)
    activations, recompute, offloaded = act.activation_bytes(model, local, parallel, dt, layers_per_stage)
    b, s = local.micro_batch, local.seq_len
    held = act.held_logits(model, dt, b, s, tp)
    activations += act.bnb_kept_head_input(model, training, dt, b, s)
    logits = act.logits_and_loss(model, dt, b, s, tp, training.loss, training.compile_loss) + held
    # a 4-bit base dequantises one weight at a time: a layer's during its (recomputed) backward,
    # the head's next to the logits (act.bnb_dequantised)
    layer_weight, head_weight = act.bnb_dequantised(model, training, tp)
    backward = max(recompute + layer_weight + act.dora_weight_transient(model, training, dt, tp),
                   head_weight + act.logits_backward_transient(
        model, b, s, tp, training.loss, training.loss_chunks, training.compile_loss, training.adapts_head,
        dt.act))
    if cp > 1:
        kv = b * training.seq_len * 2 * (model.kv_dim // min(tp, model.num_kv_heads)) * dt.act
        backward = max(backward, 2 * kv)  # the gathered k, v and their gradients
    return activations, logits, backward, offloaded, held


@lru_cache(maxsize=8192)
def _model_states(model: ModelSpec, precision: str, mixed_layout: str | None, optimizer: str,
                  finetune: str, lora_rank: int, lora_targets: tuple[str, ...], float8_all_gather: bool,
                  parallel: ParallelConfig, quant_storage: str = "auto", nf4_double_quant: bool = True,
                  nf4_quantizer: str = "transformers", use_dora: bool = False):
    """Weights, gradients, optimizer states, gathered buffers, host RAM, parameter counts and
    checkpoint sizes: they depend on the model, the parallel layout and the training settings
    named here, not on the micro-batch, sequence length or checkpointing. Cached (per-model
    constants of a layout), so a search over micro-batches works each out once."""
    training = TrainingConfig(precision=precision, mixed_layout=mixed_layout, optimizer=optimizer,
                              finetune=finetune, lora_rank=lora_rank, lora_targets=lora_targets,
                              float8_all_gather=float8_all_gather, quant_storage=quant_storage,
                              nf4_double_quant=nf4_double_quant, nf4_quantizer=nf4_quantizer,
                              use_dora=use_dora)
    p = mem.placement(training, parallel)
    weights = mem.weights_bytes(model, training, parallel, p)
    grads = mem.gradient_bytes(model, training, parallel, p)
    optim = mem.optimizer_bytes(model, training, parallel, p)
    cpu_per_gpu = 0.0
    if parallel.offload != "none":
        cpu_per_gpu += optim
        optim = 0.0
        if parallel.offload == "optimizer+params":
            # what offload leaves on the GPU: bitsandbytes' quantisation state
            resident = mem.offload_resident_weight_bytes(model, training, parallel)
            cpu_per_gpu += weights - resident + grads
            weights, grads = resident, 0.0
    gathered = mem.gathered_bytes(model, training, parallel, p, layer_params(model), grads)
    step_extra = mem.deepspeed_fp32_grad_partition_bytes(model, training, parallel, p)
    if parallel.offload != "none":
        step_extra = 0.0  # the fp32 partition lives in host RAM
    checkpoint = CheckpointSize(
        model_only_bytes=ckpt.model_only_bytes(model, training),
        full_state_bytes=ckpt.full_state_bytes(model, training, p),
    )
    return (p, weights, grads, optim, cpu_per_gpu, gathered, step_extra, _param_counts(model, training),
            checkpoint)


def estimate_compute(
    memory: MemoryEstimate,
    gpu: GPUSpec,
    interconnect: Interconnect | None = None,
    train_tokens: float | None = None,
    *,
    mfu: float | None = None,
    host: HostSpec | None = None,
) -> ComputeEstimate:
    """Step time of a setup (given by its MemoryEstimate) on a GPU over a link.

    mfu overrides the training's MFU (TrainingConfig.mfu or the MFU model in compute.py), so
    one MemoryEstimate serves GPUs and strategies with different planning MFUs. host: the node's
    CPU side (a CPU-offloaded optimizer step); DEFAULT_HOST when not given.
    """
    training, parallel = memory.training, memory.parallel
    mfu_given = mfu is not None  # a planning MFU covers the whole step
    f = memory.step
    rate, mfu = flop_rate(memory.spec, training, gpu, parallel.replicated_tp, mfu=mfu,
                          tensor_parallel=parallel.tp, cp=parallel.cp)
    compute_s, attention_s, microbatches, memory_bound_s = _compute_seconds(
        memory, gpu, rate, memory_bound=not mfu_given)
    link = interconnect or DEFAULT_LINK
    latency = cmp.latency_seconds(f.comm_calls, parallel, link)
    comm_s = cmp.comm_seconds(f.comm_bytes, parallel, link, latency)
    exposed = cmp.exposed_tp_seconds(comm_s["tp"], compute_s, parallel) + comm_s["pp"] + comm_s["ep"]
    if parallel.cp > 1:
        exposed += cmp.exposed_cp_seconds(comm_s["cp"], latency.get("cp", 0.0), attention_s, parallel)
    exposed += cmp.exposed_dp_seconds(comm_s["dp"], comm_s["dp_replicate"], f.dp_forward_share, compute_s,
                                      cmp.dp_overlap(training, parallel))
    if parallel.offload != "none":
        exposed += cmp.offload_seconds(parallel, f.shard_elems, f.gathered_shard_elems, microbatches,
                                       gpu.pcie_gbps, min(parallel.world_size, link.gpus_per_node), compute_s,
                                       host=host or DEFAULT_HOST, impl=cmp.optimizer_impl(training, parallel),
                                       elem_bytes=2 if memory.layout == "pure-half" else 4)
    step = compute_s / (1 - f.bubble_fraction) + exposed
    tps = f.tokens_per_step / step
    return _frozen(
        ComputeEstimate,
        model_flops_per_token=f.model_flops_per_token,
        hardware_flops_per_token=f.hardware_flops_per_token,
        tokens_per_step=f.tokens_per_step,
        compute_seconds=compute_s,
        comm_bytes=dict(f.comm_bytes),
        comm_seconds=comm_s,
        exposed_comm_seconds=exposed,
        bubble_fraction=f.bubble_fraction,
        step_seconds=step,
        tokens_per_second=tps,
        mfu=mfu,
        train_tokens=train_tokens,
        time_to_train_seconds=(train_tokens / tps) if train_tokens else None,
        memory_bound_seconds=memory_bound_s,
        comm_latency_seconds=latency,
    )


def _compute_seconds(memory: MemoryEstimate, gpu: GPUSpec, rate: float, *,
                     memory_bound: bool) -> tuple[float, float, int, float]:
    """A step's compute time on one GPU group at ``rate`` FLOP/s, with its ring-attention part,
    its micro-batch count and its memory-bound part: (compute, attention, micro-batches,
    memory-bound) seconds."""
    training, parallel, f = memory.training, memory.parallel, memory.step
    compute_s = f.hardware_flops_per_token * f.tokens_per_gpu_group / f.model_parallel / rate
    # the attention kernel's own rate (a pre-Hopper kernel on Hopper is slower than the model's)
    attention_s = f.attention_flops_per_token * f.tokens_per_gpu_group / f.model_parallel / rate
    slowdown = cmp.attention_slowdown(training, gpu, memory.spec) if memory_bound else 1.0
    compute_s += attention_s * (slowdown - 1)
    attention_s *= slowdown
    if parallel.cp > 1:  # ring attention: its blocks hide its traffic; unbalanced, it waits
        compute_s += attention_s * cmp.cp_imbalance(parallel)
    else:
        attention_s = 0.0
    # kernels cannot run faster than they are launched; pipeline stages pay per micro-batch
    microbatches = f.tokens_per_gpu_group // (training.micro_batch * training.seq_len)
    stage_layers = math.ceil(memory.spec.num_layers / parallel.pp)
    launch = cmp.LAYER_LAUNCH_SECONDS[training.kernel_stack] * stage_layers * microbatches
    compute_s = max(compute_s, launch)
    memory_bound_s = (cmp.memory_bound_seconds(memory.spec, training, parallel, f.tokens_per_gpu_group, gpu)
                      if memory_bound else 0.0)
    memory_bound_s += cmp.dora_seconds(memory.spec, training, parallel, f.tokens_per_gpu_group, gpu)
    compute_s += memory_bound_s
    if parallel.pp > 1:
        compute_s += cmp.PIPELINE_MICROBATCH_SECONDS * microbatches
    return compute_s, attention_s, microbatches, memory_bound_s


def flop_rate(model: ModelSpec, training: TrainingConfig, gpu: GPUSpec, tp: int = 1, *,
              mfu: float | None = None, tensor_parallel: int = 1, cp: int = 1) -> tuple[float, float]:
    """(hardware FLOP/s one GPU sustains, its MFU) in the time model (compute.py): what
    estimate_compute divides the step's hardware FLOPs by. tp: the TP ranks that replicate the
    memory-bound work (ParallelConfig.replicated_tp: 1 under sequence parallel);
    tensor_parallel and cp: the TP and CP degrees that narrow the matmuls (compute.
    narrowing_factor: 1 at TP 1 and CP 1). A search can bound a layout's time from below with
    the rate at tensor_parallel = cp = 1 (narrowing only slows it)."""
    peak = gpu.peak_tflops(training.precision)  # ValueError: no fp8 (or fp32) figure for this GPU
    if mfu is None:
        mfu = cmp.mfu(training, model, gpu, tp)
        if (tensor_parallel > 1 or cp > 1) and cmp.time_model_applies(training, gpu):
            tokens = training.micro_batch * training.seq_len
            mfu /= cmp.narrowing_factor(model, tokens, tensor_parallel, cp, gpu)
    elif not 0 < mfu <= 1:
        raise ValueError(f"mfu must be in (0, 1], got {mfu}")
    if training.precision == "fp8" and training.mfu is None and gpu.memory_bandwidth_gbps:
        peak = gpu.bf16_tflops / cmp.fp8_time_factor(training, model, gpu, tp)
    return peak * 1e12 * mfu, mfu


@dataclass(frozen=True)
class CommFloor:
    """The communication of one setup per step that depends on its compute only through
    overlap, worked out without a memory estimate: exposed(compute_seconds) is what
    estimate_compute adds to the compute for it (CPU offload aside; of ring attention's traffic,
    which hides behind attention blocks, only the per-step latency). The step time grows with
    the compute (what the overlap hides grows at most 0.9 as fast), so exposed() at a lower
    bound of the compute bounds the step from below: a search prunes with it before sizing."""

    # TP (what async TP leaves exposed however long the compute), PP, EP, CP
    activation_seconds: float
    dp_seconds: float
    replicate_seconds: float
    forward_share: float
    overlap: float

    def exposed(self, compute_seconds: float) -> float:
        return self.activation_seconds + cmp.exposed_dp_seconds(
            self.dp_seconds, self.replicate_seconds, self.forward_share, compute_seconds, self.overlap)


@dataclass(frozen=True)
class CommVolume:
    """The link-independent half of a CommFloor: bytes per step of each kind of collective."""

    volume: dict
    forward_share: float
    overlap: float
    calls: dict = field(default_factory=dict)  # collectives launched per step, by kind


def comm_volume(model: ModelSpec, training: TrainingConfig, parallel: ParallelConfig) -> CommVolume:
    """Bytes on the wire per step of a setup, from the same functions as estimate_compute."""
    layout = mem.mixed_layout(training, parallel)
    trainable_local = arch_scale(model) * mem.trainable_local_elems(model, training, parallel)
    gathered_local = mem.gathered_local_elems(model, training, parallel)
    dtypes = cmp.comm_dtypes(training, parallel, layout, mem.linear_share(model))
    grad_bytes = mem.trainable_sum(model, training, parallel, 4 if layout in ("fp32", "autocast") else 2)
    return _frozen(
        CommVolume,
        volume=cmp.comm_bytes_per_step(model, training, parallel, trainable_local, gathered_local, dtypes),
        forward_share=cmp.dp_forward_share(parallel, trainable_local, gathered_local, dtypes, training),
        overlap=cmp.dp_overlap(training, parallel),
        calls=cmp.collective_calls(model, training, parallel, trainable_local, grad_bytes))


def comm_floor(model: ModelSpec, training: TrainingConfig, parallel: ParallelConfig,
               interconnect: Interconnect | None = None, volume: CommVolume | None = None) -> CommFloor:
    """The CommFloor of a setup (see there), from the same functions as estimate_compute. Not
    validated (a search asks it about layouts it then sizes with estimate_memory). volume:
    comm_volume() of the same setup, when the caller already has it (it does not depend on the
    link)."""
    volume = volume or comm_volume(model, training, parallel)
    link = interconnect or DEFAULT_LINK
    latency = cmp.latency_seconds(volume.calls, parallel, link)
    comm = cmp.comm_seconds(volume.volume, parallel, link, latency)
    cp_latency = latency.get("cp", 0.0)
    return _frozen(
        CommFloor,
        # what stays exposed however long the compute: async TP's unhidden share, PP, EP and
        # ring attention's per-step latency
        activation_seconds=(comm["pp"] + comm["ep"] + cp_latency
                            + cmp.exposed_tp_seconds(comm["tp"], math.inf, parallel)),
        dp_seconds=comm["dp"], replicate_seconds=comm["dp_replicate"],
        forward_share=volume.forward_share, overlap=volume.overlap)


def estimate_from_memory(
    memory: MemoryEstimate,
    gpu: GPUSpec | None = None,
    interconnect: Interconnect | None = None,
    train_tokens: float | None = None,
    *,
    mfu: float | None = None,
    host: HostSpec | None = None,
) -> Estimate:
    """The full Estimate of a setup from its MemoryEstimate: estimate() without redoing memory."""
    link = interconnect or DEFAULT_LINK
    total = memory.per_gpu.total
    return _frozen(
        Estimate,
        model=memory.model,
        params=memory.params,
        per_gpu=memory.per_gpu,
        cpu_bytes=memory.cpu_bytes_per_node(link.gpus_per_node),
        fits=(total <= gpu.memory_bytes) if gpu else None,
        layout=memory.layout,
        compute=estimate_compute(memory, gpu, link, train_tokens, mfu=mfu, host=host) if gpu else None,
        checkpoint=memory.checkpoint,
        world_size=memory.world_size,
        memory=memory,
    )


def _param_counts(model: ModelSpec, training: TrainingConfig) -> ParamCounts:
    counts = model.params
    if training.finetune == "full":
        return counts
    trainable = mem.trainable_elems(model, training)
    return ParamCounts(total=counts.total + trainable, trainable=trainable,
                       active=counts.active + trainable)


def _step_facts(model: ModelSpec, training: TrainingConfig, parallel: ParallelConfig,
                layout: str) -> StepFacts:
    model_fpt = cmp.model_flops_per_token(model, training.seq_len)
    hw_fpt = cmp.hardware_flops_per_token(model, training)
    tokens_per_gpu_group = training.micro_batch * training.seq_len * training.grad_accum
    microbatches = parallel.pp_microbatches or training.grad_accum
    trainable_local = arch_scale(model) * mem.trainable_local_elems(model, training, parallel)
    gathered_local = mem.gathered_local_elems(model, training, parallel)
    dtypes = cmp.comm_dtypes(training, parallel, layout, mem.linear_share(model))
    shard = mem.shard_group(parallel) if parallel.sharding != "none" else 1
    grad_bytes = mem.trainable_sum(model, training, parallel, 4 if layout in ("fp32", "autocast") else 2)
    return StepFacts(
        model_flops_per_token=model_fpt,
        hardware_flops_per_token=hw_fpt,
        tokens_per_gpu_group=tokens_per_gpu_group,
        tokens_per_step=tokens_per_gpu_group * parallel.dp,
        model_parallel=parallel.tp * parallel.pp * parallel.cp,
        bubble_fraction=cmp.bubble_fraction(parallel.pp, microbatches, parallel.pp_interleave,
                                            parallel.pp_schedule),
        comm_bytes=cmp.comm_bytes_per_step(model, training, parallel, trainable_local, gathered_local,
                                           dtypes),
        dp_forward_share=cmp.dp_forward_share(parallel, trainable_local, gathered_local, dtypes, training),
        shard_elems=trainable_local / shard,
        gathered_shard_elems=gathered_local / shard,
        comm_calls=cmp.collective_calls(model, training, parallel, trainable_local, grad_bytes),
        attention_flops_per_token=cmp.attention_flops_per_token(model, training),
    )


def clear_caches() -> None:
    """Forget every cached per-model constant and layout's model states (loaded presets stay).

    Results never depend on the caches; this is for measuring a cold start (and for tests)."""
    for cached in (_model_states, _activations, ckpt._full_state_bytes, cmp.matmul_params_per_token,
                   cmp._utilisation, cmp._fp8_time_factor, cmp._link_rates, cmp._call_latencies,
                   cmp._latency_seconds, cmp._narrowing,
                   mem._lora_tensors, mem._trainable_sum, mem._optimizer_sum, mem._frozen_sum,
                   act._llama_adapted, act.frozen_weight_casts, act._dora_linears,
                   mem._trainable_local, mem.linear_param_elems, mem.root_param_elems, mem._trainable_elems,
                   mem._all_local, mem.layer_linear_elems,
                   param_tensors, count_params, arch_scale, layer_params):
        cached.cache_clear()
