"""Model-state memory: one small function per term. Bytes per GPU unless named cpu."""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

from .config import (
    DEEPSPEED_SHARDING,
    FSDP_SHARDING,
    LORA_HEAD,
    PAGED_OPTIMIZERS,
    WEIGHT_SHARDING,
    ParallelConfig,
    TrainingConfig,
    names_head,
)
from .dtypes import NF4_DOUBLE_QUANT_BYTES, NF4_PACKED_BYTES, NF4_PLAIN_STATE_BYTES, NF4_QUANT_STATE_BYTES
from .models import FUSED_MODULES, ModelSpec, Tensor, arch_scale, param_tensors

# Framework overhead, named and documented (docs/sizing.md "Overheads").
CUDA_CONTEXT_BYTES = 512 * 2**20  # CUDA context + kernels (lazy loading), outside PyTorch
CUBLAS_WORKSPACE_BYTES = 32 * 2**20  # cuBLAS workspace on Hopper, allocated by PyTorch
ALLOCATOR_FRAGMENTATION = 0.05  # reserved minus allocated, as a share of the peak
NCCL_BUFFER_BYTES = 256 * 2**20  # NCCL channel buffers per GPU when world size > 1
ADAM_8BIT_BLOCK = 256  # bitsandbytes blockwise quantisation, one fp32 absmax per block
TORCH_ADAM_STEP_BYTES = 4  # torch.optim.AdamW keeps a float32 `step` tensor per parameter


@dataclass(frozen=True)
class Placement:
    """Element sizes and sharding facts of one setup."""

    layout: str
    weight_bytes: float  # trainable weights
    grad_bytes: float
    master_bytes: float  # fp32 master copy kept by the optimizer
    state_bytes: float  # one optimizer state element
    shard: int  # data-parallel shard group size
    shard_weights: bool
    shard_grads: bool
    shard_optimizer: bool


def mixed_layout(training: TrainingConfig, parallel: ParallelConfig) -> str:
    if training.precision in ("bf16-mixed", "fp16-mixed"):
        if training.mixed_layout:
            return training.mixed_layout
        return "master" if parallel.sharding in DEEPSPEED_SHARDING else "autocast"
    if training.precision == "fp8":
        return "fsdp2" if training.mixed_layout == "fsdp2" else "master"
    return "fp32" if training.precision == "fp32" else "pure-half"


def placement(training: TrainingConfig, parallel: ParallelConfig) -> Placement:
    layout = mixed_layout(training, parallel)
    full = layout in ("fp32", "autocast", "fsdp2")
    weight = 4 if full else 2
    master = 4 if layout == "master" else 0
    shard = shard_group(parallel)
    s = parallel.sharding
    return Placement(
        layout=layout,
        weight_bytes=weight,
        grad_bytes=weight,
        master_bytes=master,
        state_bytes=2 if training.precision == "bf16" else 4,
        shard=shard,
        shard_weights=s in WEIGHT_SHARDING,
        shard_grads=s not in ("none", "zero1"),
        shard_optimizer=s != "none",
    )


def shard_group(parallel: ParallelConfig) -> int:
    """Ranks that shard model state: the data-parallel ranks, and under FSDP also the context-
    parallel ones (torchtitan's FSDP mesh is dp_shard x cp); HSDP shards within
    hybrid_shard_size of them and replicates across the rest."""
    ranks = parallel.dp * (parallel.cp if parallel.sharding in FSDP_SHARDING else 1)
    if parallel.sharding == "fsdp-hybrid":
        return min(ranks, parallel.hybrid_shard_size)
    return ranks


def _is_lora_target(t: Tensor, targets: tuple[str, ...]) -> bool:
    if t.kind != "linear" or t.group != "layer":
        return False
    if "all-linear" in targets:
        return True
    return any(t.name == x or t.name.endswith("." + x) or t.name == x.split(".")[-1]
               for x in targets)


# the separate q/k/v and gate/up linears that a model with fused_projections does not have
_SPLIT_NAMES = frozenset(name for split in FUSED_MODULES.values() for name in split)


@lru_cache(maxsize=256)
def _lora_tensors(model: ModelSpec, lora_targets: tuple[str, ...], r: int, dora: bool = False
                  ) -> tuple[Tensor, ...]:
    """Per-model constant (cached on the frozen ModelSpec, targets and rank). An adapter on the
    output head (LORA_HEAD) has the head's shape, whether the head is tied to the embedding or not.
    DoRA (PEFT's use_dora) adds a magnitude vector, one element per output feature, to each."""
    if model.fused_projections and (split := sorted(set(lora_targets) & _SPLIT_NAMES)):
        raise ValueError(f"lora_targets {split} name part of a linear this model fuses: Phi-3 has one"
                         f" qkv_proj and one gate_up_proj (and o_proj, down_proj), and an adapter"
                         f" covers all of one; name those, or 'all-linear'")
    targets = [t for t in param_tensors(model) if _is_lora_target(t, lora_targets)]
    if not targets:  # the head alone: no gradient would reach the frozen layers, a step not modelled
        names = sorted({t.name for t in param_tensors(model) if t.kind == "linear" and t.group == "layer"})
        raise ValueError(
            f"lora_targets {list(lora_targets)} match no linear layer of this model;"
            f" its linear layers are: {', '.join(names)} (or use 'all-linear'), and '{LORA_HEAD}'"
            " adapts the output head as well (not alone)"
        )
    if names_head(lora_targets):
        targets.append(Tensor(LORA_HEAD, (model.vocab_size, model.hidden_size), 1, "linear", "head"))
    out: list[Tensor] = []
    for t in targets:
        out.append(Tensor(t.name + ".lora_A", (r, t.shape[1]), t.count, "linear", t.group, t.expert))
        out.append(Tensor(t.name + ".lora_B", (t.shape[0], r), t.count, "linear", t.group, t.expert))
        if dora:
            out.append(Tensor(t.name + ".lora_magnitude", (t.shape[0],), t.count, "norm", t.group, t.expert))
    return tuple(out)


def local_share(t: Tensor, model: ModelSpec, parallel: ParallelConfig) -> float:
    """Fraction of a tensor's elements held by the busiest GPU (before DP sharding)."""
    share = 1.0 / parallel.tp
    if t.expert:
        share /= parallel.ep
    if parallel.pp > 1:
        if t.group == "layer":
            share *= math.ceil(model.num_layers / parallel.pp) / model.num_layers
        # embed sits on the first stage, head + final norm on the last: count both (worst)
    return share


def _shares(model: ModelSpec, tp: int, ep: int, pp: int):
    """local_share() of (dense, expert) tensors (outside layers, in layers), same arithmetic."""
    dense = 1.0 / tp
    expert = dense / ep
    if pp > 1:
        frac = math.ceil(model.num_layers / pp) / model.num_layers
        return (dense, expert), (dense * frac, expert * frac)
    return (dense, expert), (dense, expert)


def _sum(tensors, model, parallel, per_elem) -> float:
    """sum(elements x local share x per-element bytes) x arch_scale (summed in tensor order)."""
    return _sum_shares(tensors, model, parallel.tp, parallel.ep, parallel.pp, per_elem)


def _sum_shares(tensors, model, tp, ep, pp, per_elem) -> float:
    outside, inside = _shares(model, tp, ep, pp)
    total = sum(t.total * (inside if t.group == "layer" else outside)[t.expert] * per_elem(t)
                for t in tensors)
    return total * arch_scale(model)


# The sums below are per-model constants for a given (tensor set, TP, EP, PP, element size):
# cached on the frozen ModelSpec so that a search over many data-parallel sizes, micro-batches
# and GPUs sums each model's tensors once.


def _trainable(model: ModelSpec, full: bool, targets: tuple[str, ...], rank: int,
               dora: bool) -> tuple[Tensor, ...]:
    return param_tensors(model) if full else _lora_tensors(model, targets, rank, dora)


def _trainable_key(training: TrainingConfig) -> tuple[bool, tuple[str, ...], int, bool]:
    if training.finetune == "full":
        return True, (), 0, False
    return False, training.lora_targets, training.lora_rank, training.use_dora


@lru_cache(maxsize=4096)
def _trainable_sum(model: ModelSpec, full: bool, targets: tuple[str, ...], rank: int, dora: bool,
                   tp: int, ep: int, pp: int, elem_bytes: float) -> float:
    return _sum_shares(_trainable(model, full, targets, rank, dora), model, tp, ep, pp, lambda t: elem_bytes)


@lru_cache(maxsize=4096)
def _optimizer_sum(model: ModelSpec, full: bool, targets: tuple[str, ...], rank: int, dora: bool,
                   tp: int, ep: int, pp: int, optimizer: str, state_bytes: float,
                   master_bytes: float) -> float:
    return _sum_shares(_trainable(model, full, targets, rank, dora), model, tp, ep, pp,
                       lambda t: _optimizer_elem(t, optimizer, state_bytes, master_bytes))


def nf4_linears(training: TrainingConfig) -> str:
    """Which linears QLoRA keeps in 4 bits: "" (no QLoRA), "layers" (the layers' linears), or
    "layers+head" (the output head too: Lightning's BitsandbytesPrecision converts every
    nn.Linear; modelled for untied heads only, api._validate_lightning_nf4)."""
    if training.finetune != "qlora":
        return ""
    return "layers+head" if training.nf4_quantizer == "lightning" else "layers"


def is_nf4(t: Tensor, nf4: str) -> bool:
    """Whether ``t`` is one of the 4-bit linears ``nf4`` (nf4_linears) names."""
    head = t.group == "head" and nf4 == "layers+head"
    return bool(nf4) and t.kind == "linear" and (t.group == "layer" or head)


@lru_cache(maxsize=1024)
def _frozen_sum(model: ModelSpec, nf4: str, half: int, tp: int, ep: int, pp: int) -> float:
    """Bytes of the frozen base over (tp, ep, pp): NF4's 4-bit bytes for the linears nf4
    names (nf4_linears), ``half`` for every other tensor."""
    return _sum_shares(param_tensors(model), model, tp, ep, pp,
                       lambda t: NF4_DOUBLE_QUANT_BYTES if is_nf4(t, nf4) else half)


def nf4_base_bytes(model: ModelSpec, training: TrainingConfig, parallel: ParallelConfig) -> float:
    """Double-quantised NF4 bytes of QLoRA's 4-bit linears (nf4_linears) on this rank's TP/EP/PP
    share, before any data-parallel sharding; 0 without QLoRA."""
    return _frozen_sum(model, nf4_linears(training), 0, parallel.tp, parallel.ep, parallel.pp)


def trainable_sum(model: ModelSpec, training: TrainingConfig, parallel: ParallelConfig,
                  elem_bytes: float) -> float:
    """_sum(trainable tensors, ..., constant bytes per element), cached."""
    return _trainable_sum(model, *_trainable_key(training), parallel.tp, parallel.ep, parallel.pp,
                          elem_bytes)


def trainable_local_elems(model: ModelSpec, training: TrainingConfig, parallel: ParallelConfig) -> float:
    """sum(elements x local share) of the trainable tensors (before arch_scale and DP sharding)."""
    return _trainable_local(model, *_trainable_key(training), parallel.tp, parallel.ep, parallel.pp)


@lru_cache(maxsize=4096)
def _trainable_local(model: ModelSpec, full: bool, targets: tuple[str, ...], rank: int, dora: bool,
                     tp: int, ep: int, pp: int) -> float:
    outside, inside = _shares(model, tp, ep, pp)
    return sum(t.total * (inside if t.group == "layer" else outside)[t.expert]
               for t in _trainable(model, full, targets, rank, dora))


@lru_cache(maxsize=4096)
def _all_local(model: ModelSpec, tp: int, ep: int, pp: int, linear_layers_only: bool) -> float:
    outside, inside = _shares(model, tp, ep, pp)
    return sum(t.total * (inside if t.group == "layer" else outside)[t.expert] for t in param_tensors(model)
               if not linear_layers_only or (t.group == "layer" and t.kind == "linear"))


def nf4_storage(training: TrainingConfig, parallel: ParallelConfig) -> str:
    """QLoRA's quant_storage as it runs: "auto" is the half type under weight sharding (what
    FSDP and ZeRO-3 QLoRA need, what the stacks render and PEFT's guides set), uint8 otherwise."""
    if training.quant_storage != "auto":
        return training.quant_storage
    if parallel.sharding in WEIGHT_SHARDING:
        return "fp16" if training.precision == "fp16-mixed" else "bf16"
    return "uint8"


def nf4_sharded(training: TrainingConfig, parallel: ParallelConfig) -> bool:
    """QLoRA's 4-bit base weights are sharded with the other parameters: the sharding splits
    weights (FSDP full/hybrid shard, ZeRO-3) and the packed codes are stored in a floating dtype
    (bnb_4bit_quant_storage bf16/fp16/fp32, as the stacks render it for sharded layouts; torchao's
    NF4Tensor shards under FSDP2 too). With bitsandbytes' default uint8 storage, FSDP leaves them
    out (Accelerate's fsdp2_prepare_model puts non-floating frozen Params4bit in ignored_params)."""
    return (training.finetune == "qlora" and nf4_storage(training, parallel) != "uint8"
            and parallel.sharding in WEIGHT_SHARDING)


def gathered_local_elems(model: ModelSpec, training: TrainingConfig, parallel: ParallelConfig) -> float:
    """Elements a GPU all-gathers per pass under sharded weights (before sharding, after arch
    scale): every parameter, frozen ones too. QLoRA's 4-bit weights: when sharded (nf4_sharded),
    their packed codes, 0.5 B per weight = a quarter of a 16-bit element (the quantisation state
    stays on every GPU and is not gathered); with uint8 storage under FSDP they are not part of
    the shards and are not gathered."""
    tp, ep, pp = parallel.tp, parallel.ep, parallel.pp
    total = _all_local(model, tp, ep, pp, False)
    if training.finetune == "full":
        return trainable_local_elems(model, training, parallel) * arch_scale(model)
    frozen = total
    if training.finetune == "qlora" and parallel.sharding in FSDP_SHARDING + ("zero3",):
        nf4 = _all_local(model, tp, ep, pp, True)
        frozen -= nf4 * (1 - NF4_PACKED_BYTES / 2) if nf4_sharded(training, parallel) else nf4
    return (frozen + trainable_local_elems(model, training, parallel)) * arch_scale(model)


def linear_share(model: ModelSpec) -> float:
    """Share of the parameters that sit in the layers' linear weights (float8 linears)."""
    return _all_local(model, 1, 1, 1, True) / _all_local(model, 1, 1, 1, False)


def bf16_optimizer(training: TrainingConfig, parallel: ParallelConfig) -> bool:
    """DeepSpeed runs ZeRO-1 with bf16 through its BF16_Optimizer, which keeps a full fp32
    gradient accumulation buffer next to the bf16 gradients, only when grad_accum_dtype is
    fp32 and nothing is offloaded (engine._do_optimizer_sanity_check); by default the gradient
    accumulation dtype is the model's and ZeRO-1 runs the ZeRO optimizer."""
    return (training.precision == "bf16-mixed" and parallel.sharding == "zero1"
            and parallel.zero.grad_accum_dtype == "fp32" and parallel.offload == "none")


def deepspeed_fp32_accumulation(training: TrainingConfig, parallel: ParallelConfig) -> bool:
    """ZeRO-2/3 with a half model and grad_accum_dtype fp32: gradient partitions accumulate in fp32."""
    return (parallel.sharding in ("zero2", "zero3") and training.precision in ("bf16-mixed", "fp16-mixed")
            and parallel.zero.grad_accum_dtype == "fp32")


def deepspeed_fp32_grad_partition_bytes(model, training, parallel, p: Placement) -> float:
    """DeepSpeed ZeRO (master layout) casts its gradient partition to fp32 for the step.

    ZeRO-1/2 cast the whole partition; ZeRO-3 steps the optimizer one sub-group of
    ``sub_group_size`` elements at a time, so its fp32 copy is capped at one sub-group.
    BF16_Optimizer already holds fp32 gradients (counted in gradient_bytes)."""
    if p.layout != "master" or parallel.sharding not in DEEPSPEED_SHARDING:
        return 0.0
    if bf16_optimizer(training, parallel):
        return 0.0
    total = trainable_sum(model, training, parallel, 4) / p.shard
    if parallel.sharding == "zero3":
        total = min(total, 4.0 * parallel.zero.sub_group_size)
    return total


def frozen_weight_bytes(model: ModelSpec, training: TrainingConfig, parallel: ParallelConfig,
                        p: Placement) -> float:
    """LoRA/QLoRA: the frozen base model (half, or NF4 for layer linears with QLoRA).

    QLoRA under weight sharding: the packed 4-bit codes are split over the shard group when the
    storage dtype lets the sharding take them (nf4_sharded), while the quantisation state stays
    whole on every GPU; with uint8 storage under FSDP all of the 4-bit weights stay whole.
    Without double quantisation the state is larger (plain_state_bytes), whole on every GPU too."""
    if training.finetune == "full":
        return 0.0
    return _frozen_base_bytes(model, training, parallel, p) + plain_state_bytes(model, training, parallel)


def _frozen_base_bytes(model: ModelSpec, training: TrainingConfig, parallel: ParallelConfig,
                       p: Placement) -> float:
    half = 4 if training.precision == "fp32" else 2
    linears = nf4_linears(training)
    total = _frozen_sum(model, linears, half, parallel.tp, parallel.ep, parallel.pp)
    if not p.shard_weights:
        return total
    if not linears:
        return total / p.shard
    nf4 = nf4_base_bytes(model, training, parallel)
    rest = (total - nf4) / p.shard
    if nf4_sharded(training, parallel):
        return _nf4_sharded_bytes(nf4 / NF4_DOUBLE_QUANT_BYTES, training, p.shard) + rest
    if parallel.sharding in FSDP_SHARDING:
        return nf4 + rest  # uint8 storage: FSDP leaves the 4-bit weights whole on every GPU
    return total / p.shard  # ZeRO-3 with uint8 storage: unmodelled (api.unmodelled_knobs)


def offload_resident_weight_bytes(model: ModelSpec, training: TrainingConfig,
                                  parallel: ParallelConfig) -> float:
    """QLoRA weights that parameter offload leaves on the GPU. FSDP's CPU offload moves its
    FlatParameters (ZeRO-3 its partitioned parameters) to host RAM, nothing else; bitsandbytes
    quantises a Params4bit when it is moved to the GPU (Params4bit.to -> _quantize, CUDA only)
    and keeps the quantisation state on the parameter and its module (Linear4bit.quant_state),
    not in a parameter: with torch FSDP1 the module is moved to its device_id (Accelerate passes
    it) and quantised before it is flattened, sharded and offloaded, so the state stays whole on
    every GPU. With uint8 storage under FSDP the 4-bit weights are not in the shards at all and
    stay whole as well. torchao's NF4Tensor keeps its scalers inside the tensor: offloaded with
    it. 0 without parameter offload or a 4-bit base."""
    if (training.finetune != "qlora" or parallel.offload != "optimizer+params"
            or training.quant_storage == "torchao-nf4"):
        return 0.0
    nf4 = nf4_base_bytes(model, training, parallel)
    if not nf4_sharded(training, parallel) and parallel.sharding in FSDP_SHARDING:
        return nf4 + plain_state_bytes(model, training, parallel)
    return nf4 / NF4_DOUBLE_QUANT_BYTES * nf4_state_bytes(training)


def nf4_state_bytes(training: TrainingConfig) -> float:
    """Bytes of bitsandbytes' quantisation state per 4-bit weight: an 8-bit absmax per 64 weights
    with fp32 scales per 256 absmax (double quantisation), or an fp32 absmax per 64 weights."""
    return NF4_QUANT_STATE_BYTES if training.nf4_double_quant else NF4_PLAIN_STATE_BYTES


def plain_state_bytes(model: ModelSpec, training: TrainingConfig, parallel: ParallelConfig) -> float:
    """What QLoRA's quantisation state holds beyond the double-quantised one the 4-bit bytes count
    (bitsandbytes keeps it on the module, whole on every GPU): 0 with double quantisation."""
    if training.finetune != "qlora" or training.nf4_double_quant:
        return 0.0
    nf4 = nf4_base_bytes(model, training, parallel)
    return nf4 / NF4_DOUBLE_QUANT_BYTES * (NF4_PLAIN_STATE_BYTES - NF4_QUANT_STATE_BYTES)


def _nf4_sharded_bytes(elems: float, training: TrainingConfig, shard: int) -> float:
    """Per-GPU bytes of sharded 4-bit weights: the packed codes split over the shard group; the
    quantisation state whole (bitsandbytes keeps it on the module) or split with the codes
    (torchao's NF4Tensor, whose FSDP2 hooks shard its scalers and codes alike)."""
    if training.quant_storage == "torchao-nf4":
        return elems * NF4_DOUBLE_QUANT_BYTES / shard
    return elems * (NF4_PACKED_BYTES / shard + NF4_QUANT_STATE_BYTES)


def trainable_tensors(model: ModelSpec, training: TrainingConfig) -> tuple[Tensor, ...]:
    return _trainable(model, *_trainable_key(training))


# bitsandbytes pages a state only for a tensor of at least this many elements; a smaller one gets
# an ordinary torch.zeros_like (Optimizer8bit.get_state_buffer: numel < 1e5)
PAGED_MIN_ELEMENTS = 100_000


def paged_state_bytes(model: ModelSpec, training: TrainingConfig, parallel: ParallelConfig,
                      optimizer_bytes: float) -> int:
    """Of ``optimizer_bytes`` of states on a GPU, those a paged optimizer allocates in CUDA unified
    memory, outside PyTorch's allocator: the states of tensors of at least PAGED_MIN_ELEMENTS
    elements as the optimizer sees them (their TP share, and their shard when the states are
    sharded). 0 for any other optimizer."""
    if training.optimizer not in PAGED_OPTIMIZERS or not optimizer_bytes:
        return 0
    p = placement(training, parallel)
    split = parallel.tp * (p.shard if p.shard_optimizer else 1)
    tensors = trainable_tensors(model, training)
    total = sum(t.numel * t.count for t in tensors)
    paged = sum(t.numel * t.count for t in tensors if t.numel / split >= PAGED_MIN_ELEMENTS)
    return int(optimizer_bytes * (paged / total)) if total else 0


def weights_bytes(model, training, parallel, p: Placement) -> float:
    total = trainable_sum(model, training, parallel, p.weight_bytes)
    total = total / p.shard if p.shard_weights else total
    return total + frozen_weight_bytes(model, training, parallel, p)


def gradient_bytes(model, training, parallel, p: Placement) -> float:
    total = trainable_sum(model, training, parallel, p.grad_bytes)
    total = total / p.shard if p.shard_grads else total
    if p.layout == "master" and bf16_optimizer(training, parallel):
        total += trainable_sum(model, training, parallel, 4)  # fp32 accumulation, not sharded
    elif p.layout == "master" and deepspeed_fp32_accumulation(training, parallel):
        fp32 = trainable_sum(model, training, parallel, 4) / p.shard
        # ZeRO-3's partition buffer itself is fp32; ZeRO-2 keeps fp32 partitions next to its
        # contiguous half-precision ones
        total = fp32 if parallel.sharding == "zero3" else total + fp32
    return total


def accumulates_unsharded(training: TrainingConfig, parallel: ParallelConfig) -> bool:
    """FSDP's no_sync() over more than one micro-batch (ParallelConfig.fsdp_no_sync): the
    micro-batches add into unsharded gradients of the whole model on every GPU."""
    return parallel.fsdp_no_sync and training.grad_accum > 1


def unsharded_gradient_bytes(model, training, parallel, p: Placement) -> float:
    """The whole model's gradients (this rank's TP/PP share) in the gradients' dtype."""
    return trainable_sum(model, training, parallel, p.grad_bytes)


def largest_gradient_bytes(model, training, parallel, p: Placement) -> float:
    """The biggest single gradient (optimizer step in backward frees each after its step)."""
    biggest = max(trainable_tensors(model, training), key=lambda t: t.numel)
    share = local_share(biggest, model, parallel) * arch_scale(model)
    total = biggest.numel * share * p.grad_bytes
    return total / p.shard if p.shard_grads else total


def grads_freed_between_steps(training: TrainingConfig, parallel: ParallelConfig) -> bool:
    """zero_grad(set_to_none=True), PyTorch's default since 2.0, frees the gradients after the
    step, so they do not sit next to the next forward's activations -- unless micro-batches
    accumulate into them, DDP's gradients are views of its buckets, or DeepSpeed keeps its
    own gradient partitions."""
    return (training.grad_accum == 1 and parallel.sharding not in DEEPSPEED_SHARDING
            and not parallel.ddp_bucket_view)


def _optimizer_elem(t: Tensor, opt: str, s: float, master_bytes: float) -> float:
    if opt == "adamw":
        per = 2 * s + TORCH_ADAM_STEP_BYTES / t.numel
    elif opt == "adamw-8bit":
        per = 2 + 2 * 4 / ADAM_8BIT_BLOCK
    elif opt in ("sgd-momentum", "lion"):
        per = s
    else:  # adafactor (beta1=None): factored second moment for matrices
        per = s * (t.shape[0] + t.shape[1]) / t.numel if len(t.shape) == 2 else s
    return per + master_bytes


def optimizer_bytes(model, training, parallel, p: Placement) -> float:
    total = _optimizer_sum(model, *_trainable_key(training), parallel.tp, parallel.ep, parallel.pp,
                           training.optimizer_kind, p.state_bytes, p.master_bytes)
    return total / p.shard if p.shard_optimizer else total


@lru_cache(maxsize=512)
def linear_param_elems(model: ModelSpec) -> int:
    """Elements that go through a matmul (weights and their biases), incl. a tied head."""
    n = sum(t.total for t in param_tensors(model) if t.kind in ("linear", "bias", "router"))
    if model.tie_word_embeddings:
        n += model.vocab_size * model.hidden_size
    return n


@lru_cache(maxsize=512)
def root_param_elems(model: ModelSpec) -> int:
    """Elements outside the transformer layers (embeddings, final norm, head)."""
    return sum(t.total for t in param_tensors(model) if t.group != "layer")


def trainable_elems(model: ModelSpec, training: TrainingConfig) -> int:
    """Trainable elements (architecture count: before arch_scale)."""
    return _trainable_elems(model, *_trainable_key(training))


@lru_cache(maxsize=1024)
def _trainable_elems(model: ModelSpec, full: bool, targets: tuple[str, ...], rank: int, dora: bool) -> int:
    return sum(t.total for t in _trainable(model, full, targets, rank, dora))


def gathered_bytes(model, training, parallel, p: Placement, layer_params: int,
                   grads_bytes: float) -> float:
    """Compute copies of weights and communication buffers.

    - FSDP2 (fsdp2 layout): fsdp2_buffers.
    - DeepSpeed ZeRO-3: deepspeed_zero3_buffers.
    - FSDP full shard / hybrid otherwise: the root unit (embeddings, head, final norm) stays
      gathered for the whole step, plus two gathered layers (current + prefetched) and one
      layer of unsharded gradients before its reduce-scatter (LoRA: its adapters' only), all in
      the compute dtype; QLoRA's 4-bit linears gather as packed codes (nf4_gather_saving).
    - autocast without full sharding: PyTorch's autocast weight cache keeps a half copy of
      every matmul weight for the forward and backward.
    - DDP (dp > 1): gradient buckets, a second copy of all gradients unless
      gradient_as_bucket_view=True.
    - ZeRO-1/2: DeepSpeed's contiguous reduce bucket (reduce_bucket_size elements in the model
      dtype), two of them with overlap_comm (stage_1_and_2.setup_buckets double-buffers).
    """
    compute = 4 if p.layout == "fp32" else 2
    out = 0.0
    if p.shard_weights and p.layout == "fsdp2":
        out += fsdp2_buffers(model, training, parallel, p, layer_params)
    elif p.shard_weights and parallel.sharding == "zero3":
        out += deepspeed_zero3_buffers(model, training, parallel, p)
    elif p.shard_weights:
        tp = parallel.tp
        root = root_param_elems(model) / tp
        grad_layer = layer_params / tp if training.finetune == "full" else \
            trainable_elems(model, training) / model.num_layers / tp  # only the adapters have gradients
        out += root * compute + 2 * layer_params / tp * compute + grad_layer * compute
        out -= 2 * nf4_gather_saving(model, training, parallel, compute)
    elif p.layout == "autocast" and training.finetune == "full":
        out += linear_param_elems(model) * 2 / parallel.tp / parallel.pp
    if parallel.dp > 1 and parallel.sharding == "none" and not parallel.ddp_bucket_view:
        out += grads_bytes
    if parallel.sharding in ("zero1", "zero2") and parallel.dp > 1 and parallel.zero.contiguous_gradients:
        total = trainable_elems(model, training)
        stage = 1 if parallel.sharding == "zero1" else 2
        buffers = 2 if parallel.zero.overlaps(stage) else 1
        out += buffers * min(parallel.zero.reduce_bucket_size, total) * compute
    return out


def deepspeed_zero3_buffers(model: ModelSpec, training: TrainingConfig, parallel: ParallelConfig,
                            p: Placement) -> float:
    """DeepSpeed ZeRO-3 as its PartitionedParameterCoordinator fetches and releases, per GPU.

    - parameters smaller than param_persistence_threshold elements (norms, biases) stay
      gathered on every rank;
    - a parameter is not released while its next use is within max_reuse_distance elements of
      the trace: around the turn from forward to backward the last max_reuse_distance / 2
      elements of the forward stay gathered (a model smaller than that stays gathered whole);
    - the module being computed is gathered whole (the largest: embedding or head), and the
      prefetcher gathers up to prefetch_bucket_size more, within max_live_parameters;
    - backward: that module's unsharded gradient and the contiguous reduce bucket
      (reduce_bucket_size elements), both in the model dtype."""
    z = parallel.zero
    elem = 4 if p.layout == "fp32" else 2
    tensors = param_tensors(model)
    scale = arch_scale(model) / parallel.tp
    persistent = sum(t.total for t in tensors if t.numel < z.param_persistence_threshold) * scale
    partitioned = sum(t.total for t in tensors) * scale - persistent
    largest = max(t.numel for t in tensors) * scale
    if nf4_sharded(training, parallel):  # the 4-bit linears are partitioned as packed codes
        nf4 = layer_linear_elems(model) * model.num_layers * scale
        partitioned -= nf4 * (1 - NF4_PACKED_BYTES / elem)
    retained = min(partitioned, z.max_reuse_distance / 2)
    prefetch = min(z.prefetch_bucket_size, max(0.0, z.max_live_parameters - retained))
    live = min(partitioned, retained + largest + prefetch)
    bucket = min(z.reduce_bucket_size, trainable_elems(model, training)) if z.contiguous_gradients else 0
    grad = largest if training.finetune == "full" else 0
    return (persistent + live + bucket + grad) * elem


def fsdp2_buffers(model: ModelSpec, training: TrainingConfig, parallel: ParallelConfig, p: Placement,
                  layer_params: int) -> float:
    """FSDP2 with MixedPrecisionPolicy(param_dtype=bf16, reduce_dtype=fsdp_reduce_dtype), per GPU.

    - the root unit (embeddings, final norm, head) is not resharded after forward: its bf16
      parameters stay gathered for the step;
    - per transformer block: the all-gather input (the bf16 shard), the unsharded bf16
      parameters of the current and the prefetched block (every block of the stage without
      reshard-after-forward, as under pipeline parallelism), and in backward one block's
      unsharded bf16 gradients and their reduce-scatter input in the reduce dtype;
    - under pipeline parallelism torch.distributed.pipelining runs every micro-batch's
      backward with gradient sync off and reduce-scatters once after the last: each unsharded
      gradient of the stage's trainable tensors (its blocks' and the root's) is accumulated in
      the reduce dtype until then (FSDPParam.to_accumulated_grad_if_needed);
    - float8 all-gather (tensorwise): the block's linear weights are all-gathered and kept
      unsharded in float8 (1 B), norms in bf16."""
    tp = parallel.tp
    layer = layer_params / tp
    stage_layers = math.ceil(model.num_layers / parallel.pp)
    live = 2 if parallel.reshard_after_forward else stage_layers
    root = root_param_elems(model) * arch_scale(model) / tp
    reduce = 4 if parallel.fsdp_reduce_dtype == "fp32" else 2
    gathered = 2.0
    if training.float8_all_gather:
        linear = layer_linear_elems(model) * arch_scale(model) / tp
        gathered = (linear * 1 + (layer - linear) * 2) / layer
    gathered_layer = layer * gathered - nf4_gather_saving(model, training, parallel, gathered)
    gathered_blocks = gathered_layer / p.shard + gathered_layer * live
    grad_layer, grad_root = layer, root  # unsharded gradients: of the trainable tensors only
    if training.finetune != "full":
        grad_layer, grad_root = trainable_elems(model, training) / model.num_layers / tp, 0.0
    if parallel.pp > 1:  # the stage's unsharded gradients, accumulated until the last micro-batch
        reduced = grad_root * reduce + grad_layer * reduce * stage_layers
    else:  # one block's reduce-scatter input
        reduced = grad_layer * reduce
    return root * 2 + gathered_blocks + grad_layer * 2 + reduced


def nf4_gather_saving(model: ModelSpec, training: TrainingConfig, parallel: ParallelConfig,
                      elem: float) -> float:
    """Bytes one gathered QLoRA layer holds less than a layer of `elem`-byte parameters: its
    4-bit linears arrive as packed codes (0.5 B each) when they are sharded (nf4_sharded), and
    not at all when FSDP leaves them out of its shards (uint8 storage: they stay resident whole,
    counted in the weights). 0 for other fine-tunes."""
    if training.finetune != "qlora" or parallel.sharding not in FSDP_SHARDING + ("zero3",):
        return 0.0
    linear = layer_linear_elems(model) * arch_scale(model) / parallel.tp
    return linear * (elem - (NF4_PACKED_BYTES if nf4_sharded(training, parallel) else 0.0))


@lru_cache(maxsize=512)
def layer_linear_elems(model: ModelSpec) -> float:
    """Elements of one layer's matmul weights (what float8 linears cast)."""
    linear = sum(t.total for t in param_tensors(model) if t.group == "layer" and t.kind == "linear")
    return linear / model.num_layers


def framework_overhead_bytes(allocated: float, world_size: int) -> float:
    nccl = NCCL_BUFFER_BYTES if world_size > 1 else 0
    return CUDA_CONTEXT_BYTES + CUBLAS_WORKSPACE_BYTES + nccl + ALLOCATOR_FRAGMENTATION * allocated
