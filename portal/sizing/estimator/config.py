"""Inputs: training settings, parallelism, GPU and interconnect (frozen dataclasses)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from .hashing import hash_once

if TYPE_CHECKING:
    from .models import ModelSpec

PRECISIONS = ("fp32", "bf16-mixed", "fp16-mixed", "bf16", "fp8")
MIXED_LAYOUTS = ("autocast", "master", "fsdp2")
OPTIMIZERS = ("adamw", "adamw-8bit", "sgd-momentum", "adafactor", "lion")  # what sizing offers
# bitsandbytes' paged optimizers (PagedAdamW, PagedAdamW8bit): their states live in CUDA unified
# memory (cudaMallocManaged), outside PyTorch's allocator, resident on the GPU until the device runs
# out and pages them to host RAM (tensors of 1e5 elements or more; smaller ones get ordinary
# states): sized as their twin's states on the GPU (api.MemoryEstimate.outside_allocator_bytes)
PAGED_OPTIMIZERS = {"adamw-paged": "adamw", "adamw-8bit-paged": "adamw-8bit"}
OPTIMIZER_KINDS = (*OPTIMIZERS, *PAGED_OPTIMIZERS)
# How the optimizer step is implemented (what decides a CPU-offloaded step's host memory traffic):
# "default" = the frameworks' default, fused (DeepSpeed's CPUAdam; HF Trainer's adamw_torch_fused
# with torch >= 2.8; torchtitan's "fused"; torchtune's offload recipes); "fused" = one pass per
# element; "single-tensor" = torch.optim.AdamW(params) as written by hand, on CPU tensors its
# op-by-op loop (torch only defaults to foreach/fused on CUDA).
OPTIMIZER_IMPLS = ("default", "fused", "single-tensor")
# bitsandbytes' bnb_4bit_quant_storage: the dtype the packed 4-bit weights are stored as. uint8
# (bitsandbytes' default) is not a floating dtype, so FSDP leaves the weights out of its shards
# (Accelerate's fsdp2_prepare_model ignores them); a floating storage dtype is sharded like any
# parameter (FSDP, ZeRO-3). "torchao-nf4": torchao's NF4Tensor (torchtune's QLoRA), whose FSDP2
# hooks shard its codes and its quantisation scalers alike. "auto" (the default): the half type
# when the sharding splits weights (what FSDP and ZeRO-3 QLoRA need and the stacks render: PEFT's
# guides set it), bitsandbytes' uint8 otherwise.
QUANT_STORAGES = ("auto", "uint8", "bf16", "fp16", "fp32", "torchao-nf4")
# bitsandbytes' 4-bit matmul (QLoRA with a bitsandbytes base): "current" (>= 0.43.2) keeps only
# the packed weight for backward (MatMul4Bit.forward: ctx.tensors = (None, B)); "<=0.43.1" also
# kept its input A (ctx.tensors = (A, B)) until bitsandbytes#1270 ("fix QLoRA mem bug: delete
# useless buffered activation", 9e753741, July 2024): every 4-bit linear's input stays alive,
# whether or not its adapter needs it (activations.bnb_kept_inputs).
BNB_VERSIONS = ("current", "<=0.43.1")
# Who turned the base into bitsandbytes 4-bit linears (QLoRA): "transformers" (its bitsandbytes
# integration, what the stacks render) keeps the output head in the half type
# (get_keys_to_not_convert) and quantises weights as loaded (taken to be the compute dtype, as the
# stacks load them; bitsandbytes >= 0.43.0); "lightning" (Lightning Fabric's BitsandbytesPrecision,
# litgpt's --quantize bnb.*, on one GPU in a true dtype) replaces every nn.Linear, the head too,
# and quantises each from fp16 (_Linear4bit.quantize: weight.to(torch.half)), so MatMul4Bit
# dequantises to fp16 and casts to the compute dtype (activations.bnb_dequantised).
NF4_QUANTIZERS = ("transformers", "lightning")
CHECKPOINTING = ("none", "selective", "full")  # what the recommender searches by default
# every policy the estimator models: + torchtitan's op-level SAC (dense llama-family models)
CHECKPOINTING_POLICIES = (*CHECKPOINTING, "selective-op")
LOSSES = ("full", "chunked", "fused")
STACKS = ("default", "eager", "compiled", "fused", "megatron", "megatron-core")
ATTENTION = ("eager", "sdpa", "flash")
# the fused attention kernel a flash/sdpa step runs (compute.attention_kernel): "auto" picks the
# stack's own (Transformer Engine's cuDNN attention under megatron-core; SDPA's pick under the
# stacks' torch: cuDNN's where its head dim and dropout allow; FlashAttention-2 else)
ATTENTION_KERNELS = ("auto", "fa2", "cudnn", "fa3")
FINETUNE = ("full", "lora", "qlora")
LORA_HEAD = "lm_head"  # the output head's name in lora_targets (PEFT's and litgpt's module name)
SHARDING = (
    "none", "zero1", "zero2", "zero3", "fsdp-full-shard", "fsdp-shard-grad-op", "fsdp-hybrid",
)
OFFLOAD = ("none", "optimizer", "optimizer+params")
FSDP_SHARDING = ("fsdp-full-shard", "fsdp-shard-grad-op", "fsdp-hybrid")
# the shardings that split the weights themselves (ZeRO-3, FSDP full and hybrid shard)
WEIGHT_SHARDING = ("zero3", "fsdp-full-shard", "fsdp-hybrid")
DEEPSPEED_SHARDING = ("zero1", "zero2", "zero3")
FLOAT8_RECIPES = ("tensorwise", "rowwise")  # torchao float8 scaling recipes (torchtitan's names)
PP_SCHEDULES = ("1f1b", "zb-h1")  # 1F1B (interleaved with pp_interleave > 1); zero-bubble ZB-H1
REDUCE_DTYPES = ("fp32", "bf16")
GRAD_ACCUM_DTYPES = ("fp32", "bf16", "fp16")


def _choice(label: str, value: str, allowed: tuple[str, ...]) -> None:
    if value not in allowed:
        raise ValueError(f"{label}={value!r} is not supported; use one of: {', '.join(allowed)}")


# What a sizing input may be: generous (far beyond any real job) but finite, so no arithmetic of
# the estimator, the recommender or the prices leaves its range. The API's serializers, the
# wizard and a stored plan's check (portal/quotes/plan_bounds.py) use these same numbers.
# Tokens, bytes and money have theirs where they are checked (MAX_TOKENS; the recommender's Goal).
LIMITS: dict[str, tuple[int, int]] = {
    "micro_batch": (1, 65_536), "seq_len": (1, 10_000_000), "grad_accum": (1, 1_000_000),
    "lora_rank": (1, 65_536), "checkpoint_every": (1, 1_024), "loss_chunks": (1, 65_536),
    "dp": (1, 65_536), "tp": (1, 1_024), "pp": (1, 1_024), "ep": (1, 1_024), "cp": (1, 1_024),
    "host_threads_per_rank": (1, 1_024), "cpu_cores": (1, 4_096),
    "hybrid_shard_size": (1, 65_536), "pp_interleave": (1, 1_024), "pp_microbatches": (1, 1_000_000),
    "gpus_per_node": (1, 64), "global_batch_tokens": (1, 10**12), "dataset_files": (1, 10**9),
    "epochs": (0, 1_000), "deadline_hours": (0, 1_000_000), "budget_usd": (0, 10**12),
}


def limit_text(low: float, high: float) -> str:
    """How a range reads in an error: "from 1 to 65,536"."""
    return f"from {low:,} to {high:,}"


def names_head(lora_targets: tuple[str, ...]) -> bool:
    """Whether lora_targets name the output head (LORA_HEAD, bare or as a dotted module path)."""
    return any(t.split(".")[-1] == LORA_HEAD for t in lora_targets)


def require_whole(label: str, value: int) -> None:
    """A whole number within ``LIMITS[label]``, else ValueError naming the field and the range."""
    low, high = LIMITS.get(label, (1, None))
    if isinstance(value, bool) or not isinstance(value, int) or value < low or (high and value > high):
        allowed = limit_text(low, high) if high else f">= {low}"
        raise ValueError(f"{label} must be a whole number {allowed}, got {value!r}")


# PEFT's tensor-parallel LoRA layer (tuners/lora/tp_layer.py) refuses use_dora: the estimator, the
# recommender and the wizard say so in these words
DORA_TP_REFUSAL = ("DoRA runs at tensor parallel 1 only (PEFT's tensor-parallel LoRA layer,"
                   " tuners/lora/tp_layer.py, refuses use_dora)")


def check_dora_finetune(use_dora, finetune: str) -> None:
    """DoRA is a flag of LoRA adapters over a 16-bit base (the training config's and the
    recommender's workload's rule); ValueError else."""
    if not isinstance(use_dora, bool):
        raise ValueError(f"use_dora must be true or false, got {use_dora!r}")
    if use_dora and finetune != "lora":
        raise ValueError(f"use_dora is PEFT's DoRA on LoRA adapters: it needs finetune='lora', not"
                         f" {finetune!r} (on 4-bit weights, qlora, it dequantises each at every call,"
                         f" which is not modelled)")


@hash_once
@dataclass(frozen=True)
class TrainingConfig:
    """What is trained and how.

    precision: ``fp32``; ``bf16-mixed`` / ``fp16-mixed`` (half compute, fp32 optimizer);
    ``bf16`` (pure bf16: weights, grads and optimizer states in bf16, no master copy);
    ``fp8`` (Transformer-Engine style: bf16 weights and grads, fp32 master weights and
    optimizer states, fp8 GEMM inputs saved for backward).

    mixed_layout (mixed precision only): ``autocast`` = PyTorch AMP / HF Trainer / FSDP
    MixedPrecision: fp32 weights and grads, half copies made for compute;
    ``master`` = DeepSpeed / Megatron: half weights and grads plus an fp32 master copy in the
    optimizer; ``fsdp2`` = FSDP2 ``MixedPrecisionPolicy(param_dtype=bf16, reduce_dtype=fp32)``
    (torchtitan): sharded fp32 weights and grads, no master copy, bf16 compute and activations
    without per-linear autocast copies. ``None`` picks ``master`` for DeepSpeed ZeRO sharding,
    else ``autocast``.

    checkpointing: ``selective`` = Korthikanti (drop the s^2 attention scores: nothing to drop
    under SDPA/flash); ``selective-op`` = torchtitan's op-level SAC (keep every other matmul
    output and the attention output, recompute the rest); ``full`` (with ``checkpoint_every``
    N: every N-th layer, torchtitan's layer SAC).
    loss: ``full`` (fp32 log-softmax over the vocabulary), ``chunked`` (torchtune's
    CEWithChunkedOutputLoss, ``loss_chunks`` chunks upcast one at a time), ``fused`` (fused
    linear cross-entropy, e.g. Liger: no vocabulary-sized tensor kept).
    compile: torch.compile fusions (memory: RMSNorm and SwiGLU save less; speed: see stack).
    stack: the kernel quality the time model assumes (docs/sizing.md "Time"): ``default``
    picks ``compiled`` with compile, else ``eager``.
    float8_recipe (precision ``fp8``): torchao's ``tensorwise`` (one scale per tensor) or
    ``rowwise`` scaling (a scale per row: each operand is cast once per GEMM orientation);
    float8_all_gather: FSDP2 all-gathers the linear weights in float8 (tensorwise only,
    torchtitan's ``enable_fsdp_float8_all_gather``).
    optimizer_impl: how the optimizer step runs (OPTIMIZER_IMPLS): what a CPU-offloaded step
    costs on the host. quant_storage (QLoRA): bitsandbytes' ``bnb_4bit_quant_storage``; a
    floating dtype lets FSDP and ZeRO-3 shard the 4-bit weights (QUANT_STORAGES).
    attention_kernel: the fused attention kernel of a flash/sdpa step (ATTENTION_KERNELS): on
    Hopper FlashAttention-2 runs attention well below the time model's rate (compute.py).
    bnb_version (QLoRA on bitsandbytes): ``<=0.43.1`` for runs on bitsandbytes before 0.43.2,
    whose 4-bit matmul kept its input for backward (BNB_VERSIONS). nf4_double_quant (QLoRA on
    bitsandbytes): ``bnb_4bit_use_double_quant`` / ``compress_statistics``; False keeps one fp32
    absmax per 64 weights (4/64 B) instead of an 8-bit one with fp32 scales per 256 blocks.
    nf4_quantizer (QLoRA on bitsandbytes): which library made the 4-bit linears (NF4_QUANTIZERS).
    lora_targets (LoRA/QLoRA): the layer linears' names (``q_proj`` …, or ``all-linear``, which as
    in PEFT leaves the output head out), and ``lm_head`` for an adapter on the output head.
    """

    precision: str = "bf16-mixed"
    mixed_layout: str | None = None
    optimizer: str = "adamw"
    micro_batch: int = 1
    seq_len: int = 2048
    grad_accum: int = 1
    checkpointing: str = "none"
    attention: str = "sdpa"
    finetune: str = "full"
    lora_rank: int = 16
    lora_targets: tuple[str, ...] = ("q_proj", "k_proj", "v_proj", "o_proj")
    lora_dropout: float = 0.0  # PEFT LoraConfig.lora_dropout: each adapter drops its own input copy
    use_dora: bool = False  # PEFT LoraConfig.use_dora: DoRA's magnitude vectors and what they keep
    dropout: float | None = None  # None: the model's own dropout probability
    mfu: float | None = None  # None: the MFU model in compute.py
    checkpoint_every: int = 1  # full checkpointing on every N-th layer
    loss: str = "full"
    loss_chunks: int = 8  # torchtune's num_output_chunks
    compile: bool = False
    compile_loss: bool = False  # the loss compiled too (torchtune): saves bf16 logits + lse
    optimizer_in_backward: bool = False  # step each parameter in its grad hook (torchtune)
    activation_offload: bool = False  # saved activations to host RAM (torchtune OffloadActivations)
    stack: str = "default"
    float8_recipe: str = "tensorwise"
    float8_all_gather: bool = False
    optimizer_impl: str = "default"
    quant_storage: str = "auto"  # QLoRA: bnb_4bit_quant_storage (QUANT_STORAGES)
    attention_kernel: str = "auto"  # the fused attention kernel (ATTENTION_KERNELS)
    bnb_version: str = "current"  # QLoRA on bitsandbytes: which MatMul4Bit saves (BNB_VERSIONS)
    nf4_double_quant: bool = True  # QLoRA on bitsandbytes: the absmax quantised too (8-bit)
    nf4_quantizer: str = "transformers"  # QLoRA on bitsandbytes: who made the 4-bit linears

    def _check_dora(self) -> None:
        check_dora_finetune(self.use_dora, self.finetune)
        if self.use_dora and self.adapts_head:
            raise ValueError("DoRA on the output head (lm_head in lora_targets) is not modelled: adapt the"
                             " layers' linears")

    def __post_init__(self) -> None:
        _choice("precision", self.precision, PRECISIONS)
        _choice("optimizer_impl", self.optimizer_impl, OPTIMIZER_IMPLS)
        _choice("quant_storage", self.quant_storage, QUANT_STORAGES)
        _choice("bnb_version", self.bnb_version, BNB_VERSIONS)
        if not isinstance(self.nf4_double_quant, bool):
            raise ValueError("nf4_double_quant must be true or false")
        if not self.nf4_double_quant and self.finetune != "qlora":
            raise ValueError("nf4_double_quant=False is bitsandbytes' plain NF4: it needs finetune='qlora'")
        if not self.nf4_double_quant and self.quant_storage == "torchao-nf4":
            raise ValueError("nf4_double_quant=False is bitsandbytes' plain NF4; torchao's NF4Tensor always"
                             " quantises its scalers")
        _choice("nf4_quantizer", self.nf4_quantizer, NF4_QUANTIZERS)
        if self.nf4_quantizer != "transformers" and (self.finetune != "qlora"
                                                     or self.quant_storage == "torchao-nf4"):
            raise ValueError(f"nf4_quantizer={self.nf4_quantizer!r} makes bitsandbytes 4-bit linears: it"
                             " needs finetune='qlora' on bitsandbytes (not torchao-nf4)")
        _choice("float8_recipe", self.float8_recipe, FLOAT8_RECIPES)
        if self.float8_all_gather and (self.precision != "fp8" or self.float8_recipe != "tensorwise"):
            raise ValueError("float8_all_gather needs precision='fp8' with float8_recipe='tensorwise'"
                             " (rowwise scaling all-gathers in bf16)")
        if self.mixed_layout is not None:
            _choice("mixed_layout", self.mixed_layout, MIXED_LAYOUTS)
        _choice("optimizer", self.optimizer, OPTIMIZER_KINDS)
        _choice("checkpointing", self.checkpointing, CHECKPOINTING_POLICIES)
        _choice("attention", self.attention, ATTENTION)
        _choice("attention_kernel", self.attention_kernel, ATTENTION_KERNELS)
        _choice("finetune", self.finetune, FINETUNE)
        _choice("loss", self.loss, LOSSES)
        _choice("stack", self.stack, STACKS)
        for label in ("micro_batch", "seq_len", "grad_accum", "checkpoint_every", "loss_chunks"):
            require_whole(label, getattr(self, label))
        if self.finetune != "full":
            require_whole("lora_rank", self.lora_rank)
            if not self.lora_targets:
                raise ValueError("lora_targets is empty; name the linear layers LoRA adapts")
            if self.adapts_head and self.loss == "fused":
                raise ValueError("loss='fused' multiplies by the head's own weight inside its kernel (Liger"
                                 " reads lm_head.weight, which PEFT answers with the base weight), so an"
                                 " adapter on the output head would not train: use loss 'full' or"
                                 " 'chunked' with lm_head in lora_targets")
        if not 0 <= self.lora_dropout < 1:
            raise ValueError(f"lora_dropout must be in [0, 1), got {self.lora_dropout}")
        self._check_dora()
        if self.dropout is not None and not 0 <= self.dropout < 1:
            raise ValueError(f"dropout must be in [0, 1), got {self.dropout}")
        if self.mfu is not None and not 0 < self.mfu <= 1:
            raise ValueError(f"mfu must be in (0, 1], got {self.mfu}")
        if self.checkpoint_every > 1 and self.checkpointing != "full":
            raise ValueError("checkpoint_every applies to checkpointing='full'; set both")
        if self.optimizer_in_backward and self.grad_accum > 1:
            raise ValueError("optimizer_in_backward steps in backward: it cannot accumulate gradients"
                             " (grad_accum must be 1)")
        if self.mixed_layout == "fsdp2" and self.precision not in ("bf16-mixed", "fp8"):
            raise ValueError("mixed_layout='fsdp2' is bf16 compute over fp32 parameters: use"
                             " precision='bf16-mixed' (or 'fp8' for float8 matmuls)")
        if self.checkpointing == "selective-op" and self.attention == "eager":
            raise ValueError("selective-op checkpointing saves the fused attention output; use"
                             " attention='sdpa' or 'flash'")

    def dropout_for(self, model: ModelSpec) -> float:
        """The dropout probability a step of ``model`` uses: this setting, else the model's own."""
        return self.dropout if self.dropout is not None else model.dropout

    @property
    def adapts_head(self) -> bool:
        """LoRA/QLoRA with an adapter on the output head (``lm_head`` named in lora_targets)."""
        return self.finetune != "full" and names_head(self.lora_targets)

    @property
    def optimizer_kind(self) -> str:
        """The optimizer whose states are counted (a paged optimizer's non-paged twin)."""
        return PAGED_OPTIMIZERS.get(self.optimizer, self.optimizer)

    @property
    def kernel_stack(self) -> str:
        if self.stack != "default":
            return self.stack
        return "compiled" if self.compile else "eager"


@hash_once
@dataclass(frozen=True)
class ZeroConfig:
    """DeepSpeed's ``zero_optimization`` settings that size its buffers, with DeepSpeed's own
    defaults (deepspeed/runtime/zero/config.py); element counts, not bytes.

    overlap_comm None: DeepSpeed's dynamic default (on for stage 3 only); with it ZeRO-1/2 keep
    two reduce buckets (double buffering). grad_accum_dtype None: the model dtype (DeepSpeed
    ``data_types.grad_accum_dtype``); ``fp32`` with bf16 makes ZeRO-1 run BF16_Optimizer and
    ZeRO-2/3 accumulate fp32 gradient partitions."""

    reduce_bucket_size: int = 500_000_000
    overlap_comm: bool | None = None
    contiguous_gradients: bool = True
    prefetch_bucket_size: int = 50_000_000  # stage3_prefetch_bucket_size
    max_live_parameters: int = 1_000_000_000  # stage3_max_live_parameters
    max_reuse_distance: int = 1_000_000_000  # stage3_max_reuse_distance
    param_persistence_threshold: int = 100_000  # stage3_param_persistence_threshold
    sub_group_size: int = 1_000_000_000
    grad_accum_dtype: str | None = None

    def __post_init__(self) -> None:
        for label in ("reduce_bucket_size", "prefetch_bucket_size", "max_live_parameters",
                      "max_reuse_distance", "param_persistence_threshold", "sub_group_size"):
            value = getattr(self, label)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ValueError(f"zero.{label} must be a whole number >= 0, got {value!r}")
        if not isinstance(self.contiguous_gradients, bool) or not isinstance(self.overlap_comm, bool | None):
            raise ValueError("zero.overlap_comm must be true, false or null and zero.contiguous_gradients"
                             " true or false")
        if self.grad_accum_dtype is not None:
            _choice("zero.grad_accum_dtype", self.grad_accum_dtype, GRAD_ACCUM_DTYPES)

    def overlaps(self, stage: int) -> bool:
        return self.overlap_comm if self.overlap_comm is not None else stage == 3


@hash_once
@dataclass(frozen=True)
class ParallelConfig:
    """How the job is spread over GPUs. World size = dp * tp * pp * cp (ep lives inside dp).

    cp: context parallelism (ring attention over the sequence; FSDP shards over dp x cp, as
    torchtitan does). pp_schedule: ``1f1b`` (interleaved with pp_interleave > 1) or ``zb-h1``
    (zero-bubble, Qi et al. 2024). async_tp: TP collectives decomposed and overlapped with the
    matmuls (PyTorch async TP). fsdp_reduce_dtype: FSDP2 MixedPrecisionPolicy.reduce_dtype.
    zero: DeepSpeed's buffer settings (ZeroConfig). cp_load_balance: ring attention's round-robin
    split of a causal sequence (PyTorch's default); without it the rank holding the sequence's end
    computes every block the others skip. host_threads_per_rank: the OpenMP threads a rank's CPU
    optimizer step runs on (torchrun and ``accelerate launch`` set OMP_NUM_THREADS=1 per process
    when it is unset; the stacks launch through them). fsdp_no_sync: gradient accumulation inside
    FSDP's no_sync() (FSDP2: set_requires_gradient_sync(False)), as Lightning Fabric's
    no_backward_sync does: the micro-batches before the last add into unsharded gradients of the
    whole model on every GPU and reduce-scatter once per step (torch FSDP's docs: "FSDP will
    accumulate the full model gradients (instead of gradient shards) until the eventual sync")."""

    dp: int = 1
    sharding: str = "none"
    offload: str = "none"
    tp: int = 1
    sp: bool = False
    pp: int = 1
    pp_microbatches: int | None = None  # None: grad_accum micro-batches per step
    ep: int = 1
    hybrid_shard_size: int = 8  # fsdp-hybrid: shard within this many GPUs (a node)
    ddp_bucket_view: bool = False  # DDP gradient_as_bucket_view
    reshard_after_forward: bool = True  # FSDP: free gathered layers after their forward
    pp_interleave: int = 1  # virtual pipeline stages per GPU (interleaved 1F1B)
    cp: int = 1
    pp_schedule: str = "1f1b"
    async_tp: bool = False
    fsdp_reduce_dtype: str = "fp32"
    zero: ZeroConfig = ZeroConfig()
    cp_load_balance: bool = True  # PyTorch's _cp_options.enable_load_balance (its default)
    host_threads_per_rank: int = 1  # OpenMP threads of a rank's CPU optimizer step
    fsdp_no_sync: bool = False  # FSDP: accumulate micro-batches unsharded, reduce once per step

    def __post_init__(self) -> None:
        if not isinstance(self.cp_load_balance, bool):
            raise ValueError("cp_load_balance must be true or false")
        require_whole("host_threads_per_rank", self.host_threads_per_rank)
        for label in ("dp", "tp", "pp", "ep", "hybrid_shard_size", "pp_interleave", "cp"):
            require_whole(label, getattr(self, label))
        _choice("pp_schedule", self.pp_schedule, PP_SCHEDULES)
        _choice("fsdp_reduce_dtype", self.fsdp_reduce_dtype, REDUCE_DTYPES)
        if not isinstance(self.zero, ZeroConfig):
            raise ValueError("zero must be a ZeroConfig (DeepSpeed's zero_optimization settings)")
        if self.pp_microbatches is not None:
            require_whole("pp_microbatches", self.pp_microbatches)
        _choice("sharding", self.sharding, SHARDING)
        _choice("offload", self.offload, OFFLOAD)
        if self.offload != "none" and self.sharding == "none":
            raise ValueError("CPU offload needs ZeRO or FSDP sharding; set sharding too")
        if self.offload == "optimizer+params" and self.sharding not in ("zero3", "fsdp-full-shard"):
            raise ValueError("offloading parameters needs zero3 or fsdp-full-shard")
        if not isinstance(self.fsdp_no_sync, bool):
            raise ValueError("fsdp_no_sync must be true or false")
        if self.fsdp_no_sync and (self.sharding not in FSDP_SHARDING or self.offload != "none"):
            raise ValueError("fsdp_no_sync is FSDP's no_sync(): it needs FSDP sharding without CPU offload")
        if self.sp and self.tp == 1:
            raise ValueError("sequence parallel (sp) needs tp > 1")
        if self.pp_interleave > 1 and self.pp == 1:
            raise ValueError("pp_interleave (virtual stages) needs pp > 1")
        if self.pp_schedule != "1f1b" and self.pp == 1:
            raise ValueError(f"pp_schedule={self.pp_schedule!r} needs pp > 1")
        if self.async_tp and self.tp == 1:
            raise ValueError("async_tp overlaps tensor-parallel collectives: it needs tp > 1")
        if self.dp % self.ep:
            raise ValueError(f"ep={self.ep} must divide dp={self.dp} (experts shard over DP ranks)")

    @property
    def world_size(self) -> int:
        return self.dp * self.tp * self.pp * self.cp

    @property
    def replicated_tp(self) -> int:
        """TP ranks that each run the whole norms, dropouts and residuals: all of them without
        sequence parallelism, none twice with it (each rank takes its share of the sequence)."""
        return 1 if self.sp else self.tp


@hash_once
@dataclass(frozen=True)
class GPUSpec:
    """Dense (no sparsity) peak throughput; memory in bytes (vendor GB = 1e9 bytes)."""

    name: str
    memory_bytes: int
    bf16_tflops: float
    fp8_tflops: float | None = None
    fp32_tflops: float = 0.0
    memory_bandwidth_gbps: float = 0.0  # GB/s
    pcie_gbps: float = 32.0  # host link, GB/s per direction (x16: Gen4 32, Gen5 64): CPU offload

    def __post_init__(self) -> None:
        if self.memory_bytes <= 0 or self.bf16_tflops <= 0:
            raise ValueError(f"GPU {self.name!r} needs positive memory_bytes and bf16_tflops")
        if self.pcie_gbps <= 0:
            raise ValueError(f"GPU {self.name!r} needs a positive pcie_gbps")

    def peak_tflops(self, precision: str) -> float:
        if precision == "fp32":
            if not self.fp32_tflops:
                raise ValueError(f"GPU {self.name!r} has no fp32_tflops for fp32 training")
            return self.fp32_tflops
        if precision == "fp8":
            if not self.fp8_tflops:
                raise ValueError(f"GPU {self.name!r} has no FP8 tensor cores; pick bf16-mixed")
            return self.fp8_tflops
        return self.bf16_tflops


@hash_once
@dataclass(frozen=True)
class HostSpec:
    """The host CPU side of a node, for a CPU-offloaded optimizer step.

    cpu_cores: physical cores of the node; memory_bandwidth_gbps: what all its cores stream
    together (STREAM-like, GB/s); core_bandwidth_gbps: what one core streams alone (Little's law:
    the misses its L2 keeps in flight x 64 B / DRAM latency); simd_fp32_lanes and clock_ghz: one
    core's vector width and clock (how fast its arithmetic keeps up)."""

    cpu_cores: int = 112
    memory_bandwidth_gbps: float = 400.0
    core_bandwidth_gbps: float = 26.7
    simd_fp32_lanes: int = 16
    clock_ghz: float = 2.0

    def __post_init__(self) -> None:
        require_whole("cpu_cores", self.cpu_cores)
        if self.memory_bandwidth_gbps <= 0 or self.core_bandwidth_gbps <= 0 or self.clock_ghz <= 0:
            raise ValueError("host bandwidths and clock must be positive")
        if self.simd_fp32_lanes not in (4, 8, 16):
            raise ValueError("simd_fp32_lanes is 4 (SSE/NEON), 8 (AVX2) or 16 (AVX-512)")


@hash_once
@dataclass(frozen=True)
class Interconnect:
    """Links between GPUs.

    intra_node_gbps: GB/s per GPU per direction inside a node (NVLink 4: 450 = the
    datasheet's 900 GB/s bidirectional / 2; PCIe Gen4 x16: 32; Gen5 x16: 64).
    inter_node_gbit: Gb/s per GPU between nodes (InfiniBand NDR 400, HDR 200,
    Ethernet 100/25/1); 0 means single node only.
    """

    intra_node_gbps: float = 450.0
    inter_node_gbit: float = 400.0
    gpus_per_node: int = 8
    intra_kind: str = "nvlink"
    inter_kind: str = "infiniband"

    def __post_init__(self) -> None:
        require_whole("gpus_per_node", self.gpus_per_node)
        if self.intra_node_gbps <= 0 or self.inter_node_gbit < 0:
            raise ValueError("link bandwidths must be positive")

    @classmethod
    def nvlink(cls, bidirectional_gbps: float = 900.0, **kw) -> Interconnect:
        return cls(intra_node_gbps=bidirectional_gbps / 2, intra_kind="nvlink", **kw)

    @classmethod
    def pcie(cls, gen: int = 4, **kw) -> Interconnect:
        per_direction = {3: 16.0, 4: 32.0, 5: 64.0}
        if gen not in per_direction:
            raise ValueError(f"PCIe gen {gen} unknown; use 3, 4 or 5")
        return cls(intra_node_gbps=per_direction[gen], intra_kind=f"pcie-gen{gen}", **kw)
