"""FLOPs, step time (MFU model), communication volume and time, pipeline bubble."""

from __future__ import annotations

import math
from functools import lru_cache

from .config import Interconnect, ParallelConfig, TrainingConfig
from .models import ModelSpec, arch_scale, param_tensors

# MFU = achieved model FLOPs / dense peak. Planning values from public reports: GPT-NeoX
# 150-180 TFLOP/s on A100 (48-58 %), Llama 3 405B 38-43 % on H100, Megatron 175B/530B
# 52-56 % (Korthikanti). FP8 runs reach a lower fraction of their doubled peak.
MFU_BY_PRECISION = {"fp32": 0.50, "half": 0.45, "fp8": 0.35}  # fp32, and GPUs without a bandwidth

# Achievable dense matmul TFLOP/s / datasheet peak (stas00/ml-engineering mamf-finder,
# shared/reference/published_cases.json "mamf_max_achievable_matmul"); first match wins.
# H200 has no published bf16 figure: its own fp8 measurement (1453.4 of 1979) over H100's
# (1402.6 of 1979) scales H100's bf16 efficiency -- not GH200's.
# PCIe cards of an SXM die sustain less of their own (lower-clocked) peak under tensor load:
# A100 PCIe 252.9 vs SXM 271.2 of the same 312; the H100 and H200 PCIe/NVL cards, without a
# measurement of their own, take the same ratio on their SXM sibling's efficiency.
PCIE_CARD_RATIO = 252.9 / 271.2
_H100, _H200 = 794.5 / 989, 794.5 / 989 * 1453.4 / 1402.6
MATMUL_EFFICIENCY = (
    ("GH200", 828.6 / 989), ("GB200", 1822.0 / 2500),
    ("H200 NVL", _H200 * PCIE_CARD_RATIO), ("H200", _H200),
    ("H100 PCIe", _H100 * PCIE_CARD_RATIO), ("H100 NVL", _H100 * PCIE_CARD_RATIO), ("H100", _H100),
    ("A100 80GB PCIe", 252.9 / 312), ("A100 40GB PCIe", 252.9 / 312),
    ("A100", 271.2 / 312), ("B300", 1769.0 / 2250), ("B200", 1745.0 / 2250),
)
DEFAULT_MATMUL_EFFICIENCY = 0.70
FP8_MATMUL_EFFICIENCY = (  # same source, fp8 measured / fp8 peak (PCIe cards: PCIE_CARD_RATIO)
    ("GB200", 3615.6 / 5000), ("H200 NVL", 1453.4 / 1979 * PCIE_CARD_RATIO), ("H200", 1453.4 / 1979),
    ("H100 PCIe", 1402.6 / 1979 * PCIE_CARD_RATIO), ("H100 NVL", 1402.6 / 1979 * PCIE_CARD_RATIO),
    ("H100", 1402.6 / 1979), ("B200", 3432.5 / 4500),
)
FP8_CAST_TRAFFIC = 0.3  # float8 scaling: amax, scale and cast of inputs, weights and grads
# rowwise scaling casts every GEMM operand once per orientation it is used in (a row-scaled
# and a column-scaled copy), twice the tensorwise casts
FP8_ROWWISE_CAST_FACTOR = 2.0
# The time model (docs/sizing.md "Time"): a step reaches U of the achievable matmul rate on
# its matmuls and spends memory-bound time on norms, activations, residuals and the optimizer
# in proportion to the hidden size h, so utilisation = eff * U / (1 + h0 * r / h), with r the
# GPU's FLOP/byte ratio relative to the A100's. U and h0 are per kernel stack, from its public
# runs: fused (FlashAttention's GPT-3 training, llm-foundry), megatron (Megatron-LM 2021-22),
# compiled (torch.compile), eager (plain PyTorch modules).
A100_FLOPS_PER_BYTE = 312e12 / 2039e9
STACK_EFFICIENCY = {  # stack: (U, h0)
    "fused": (0.77, 390.0),
    "megatron": (0.73, 200.0),
    "compiled": (0.78, 520.0),
    "eager": (0.72, 1000.0),
}
LAYER_LAUNCH_SECONDS = {"fused": 60e-6, "megatron": 60e-6, "compiled": 60e-6, "eager": 200e-6}
PIPELINE_MICROBATCH_SECONDS = 0.5e-3  # per micro-batch per stage: p2p send/recv and schedule
LINK_EFFICIENCY = 0.80  # NCCL bus bandwidth / link bandwidth (nccl-tests, large messages)
DP_OVERLAP = 0.90  # share of data-parallel communication hidden behind the backward pass
# Megatron-LM 2021-22 all-reduced gradients after the backward pass (no overlap until 2023).
DP_OVERLAP_BY_STACK = {"megatron": 0.0}
# CPU offload (docs/sizing.md "Offload"): the optimizer step on the host is bound by host memory
# bandwidth; DeepSpeed's CPU-Adam streams fp32 weights, gradients and both moments in (16 B)
# and weights and moments plus the bf16 copy out (14 B) per parameter.
CPU_ADAM_BYTES_PER_PARAM = 30
HOST_ADAM_BYTES_PER_SECOND = 100e9  # per node: about half of a 2-socket server's STREAM bandwidth
# torch.optim.AdamW on the CPU (FSDP's CPUOffloadPolicy): DeepSpeed reports its CPU-Adam 5-7x
# faster than the standard PyTorch implementation (deepspeed.ai ZeRO-Offload tutorial).
TORCH_CPU_ADAM_SLOWDOWN = 6.0
PCIE_EFFICIENCY = 0.80  # pinned host<->GPU copies / PCIe x16 per direction


def model_flops_per_token(model: ModelSpec, seq_len: int) -> float:
    """6 x (matmul parameters active per token) + 12·L·d_attn·s attention (PaLM, App. B).

    The input embedding is a lookup and is not counted; the LM head is a matmul and is.
    """
    attention = 12 * model.num_layers * model.q_dim * seq_len
    return 6 * matmul_params_per_token(model) * arch_scale(model) + attention


@lru_cache(maxsize=512)
def matmul_params_per_token(model: ModelSpec) -> int:
    """Matmul parameters one token goes through (routed experts only, tied head included)."""
    matmul = 0
    for t in param_tensors(model):
        if t.kind in ("linear", "router"):
            n = t.total
            if t.expert:
                n = n * model.experts_per_token // model.num_experts
            matmul += n
    if model.tie_word_embeddings:
        matmul += model.vocab_size * model.hidden_size
    return matmul


def hardware_flops_per_token(model: ModelSpec, training: TrainingConfig) -> float:
    """Model FLOPs plus recomputation (counted as hardware FLOPs); LoRA skips the frozen
    weights' weight-gradient (2N). Full checkpointing re-runs the forward (2N of 6N) of the
    checkpointed layers (not the output head); op-level SAC re-runs the matmuls it does not
    save (wk, wo, w3)."""
    base = model_flops_per_token(model, training.seq_len)
    flops = base * (4 / 6 if training.finetune != "full" else 1)
    if training.checkpointing == "full":
        # the checkpointed decoder layers run their forward again; the output head does not
        share = math.ceil(model.num_layers / training.checkpoint_every) / model.num_layers
        flops += (base - 6 * model.vocab_size * model.hidden_size * arch_scale(model)) / 3 * share
    elif training.checkpointing == "selective-op":
        from .activations import op_sac_recompute_matmul_params
        flops += 2 * op_sac_recompute_matmul_params(model) * model.num_layers * arch_scale(model)
    return flops


def matmul_efficiency(gpu_name: str) -> float:
    for fragment, eff in MATMUL_EFFICIENCY:
        if fragment.lower() in gpu_name.lower():
            return eff
    return DEFAULT_MATMUL_EFFICIENCY


def time_model_applies(training: TrainingConfig, gpu) -> bool:
    """Whether the time model below sets the rate (a GPU that states its memory bandwidth, no
    MFU given, not fp32); otherwise a planning MFU covers the whole step."""
    return (training.mfu is None and training.precision != "fp32" and gpu is not None
            and bool(gpu.memory_bandwidth_gbps))


def mfu(training: TrainingConfig, model: ModelSpec | None = None, gpu=None, tp: int = 1) -> float:
    """Share of the dense peak the step's hardware FLOPs reach (HFU).

    With a model and a GPU that states its memory bandwidth: the time model above, by GPU,
    kernel stack and the per-GPU hidden size (h / tp, tp the ranks replicating the memory-bound
    work: 1 under sequence parallel). Otherwise the planning constants."""
    if training.mfu is not None:
        return training.mfu
    if training.precision == "fp32":
        return MFU_BY_PRECISION["fp32"]
    if model is None or not time_model_applies(training, gpu):
        return MFU_BY_PRECISION["fp8" if training.precision == "fp8" else "half"]
    return _utilisation(training.kernel_stack, model.hidden_size, tp, gpu)


@lru_cache(maxsize=4096)
def _utilisation(stack: str, hidden: int, tp: int, gpu) -> float:
    u, h0 = STACK_EFFICIENCY[stack]
    return matmul_efficiency(gpu.name) * u / (1 + _memory_bound_share(h0, hidden, tp, gpu))


# Of a layer's memory-bound traffic, the share on hidden-sized tensors (norms, dropouts, residual
# adds: ~15 h-sized reads and writes per token forward) that every TP rank runs whole without
# sequence parallelism; the rest (the MLP activation on 4h/tp, ~8 reads and writes) is split.
TP_REPLICATED_SHARE = 15 / 23


def _memory_bound_share(h0: float, hidden: int, tp: int, gpu) -> float:
    ratio = gpu.bf16_tflops * 1e12 / (gpu.memory_bandwidth_gbps * 1e9) / A100_FLOPS_PER_BYTE
    return h0 * ratio * (TP_REPLICATED_SHARE * tp + 1 - TP_REPLICATED_SHARE) / hidden


def memory_bound_share(training: TrainingConfig, model: ModelSpec, gpu, tp: int = 1) -> float:
    """Memory-bound time per unit of matmul time: h0 * r * w / h, with w = the share of it the
    tp ranks replicate x tp + the rest (w = 1 at tp 1 and under sequence parallel)."""
    return _memory_bound_share(STACK_EFFICIENCY[training.kernel_stack][1], model.hidden_size, tp, gpu)


def fp8_time_factor(training: TrainingConfig, model: ModelSpec, gpu, tp: int = 1) -> float:
    """Step time under float8 / the same step in bf16. The linear layers' matmuls run at the
    measured fp8 matmul rate, attention stays bf16, and the memory-bound part grows by the
    scaling casts."""
    return _fp8_time_factor(training.kernel_stack, training.seq_len, model, gpu, tp, training.float8_recipe)


@lru_cache(maxsize=1024)
def _fp8_time_factor(stack: str, seq_len: int, model: ModelSpec, gpu, tp: int, recipe: str = "tensorwise"
                     ) -> float:
    training = TrainingConfig(seq_len=seq_len, stack=stack)
    attention = 12 * model.num_layers * model.q_dim * training.seq_len
    total = model_flops_per_token(model, training.seq_len)
    bf16 = gpu.bf16_tflops * matmul_efficiency(gpu.name)
    fp8_eff = next((e for f, e in FP8_MATMUL_EFFICIENCY if f.lower() in gpu.name.lower()),
                   matmul_efficiency(gpu.name) * 0.88)
    matmul = ((total - attention) * bf16 / (gpu.fp8_tflops * fp8_eff) + attention) / total
    share = memory_bound_share(training, model, gpu, tp)
    casts = FP8_CAST_TRAFFIC * (FP8_ROWWISE_CAST_FACTOR if recipe == "rowwise" else 1.0)
    return (matmul + share * (1 + casts)) / (1 + share)


# Materialised attention (attention="eager": the s x s scores in memory): the score-sized
# elementwise kernels are memory-bound and outside the matmul rate. Bytes moved per score element
# per training step at half precision with a fused scale-mask-softmax (Megatron-LM's; unfused
# kernels move more): softmax forward reads the scores and writes the probabilities (4), backward
# reads their gradient and the probabilities and writes the scores' gradient (6); attention
# dropout adds a pass forward (read, write, 1-byte mask: 5) and backward (5). Full
# recomputation runs the forward passes again.
SOFTMAX_BYTES = (4, 6)  # (forward, backward) per score element
ATTENTION_DROPOUT_BYTES = (5, 5)
HBM_EFFICIENCY = 0.80  # sustained / datasheet memory bandwidth on streaming kernels


def attention_score_bytes(model: ModelSpec, training: TrainingConfig, tp: int = 1, cp: int = 1) -> float:
    """Memory traffic of materialised attention scores per sequence on one GPU (all its layers
    of a model-parallel shard: heads / tp, queries / cp); 0 under SDPA or flash attention."""
    if training.attention != "eager":
        return 0.0
    p = training.dropout if training.dropout is not None else model.dropout
    fwd, bwd = SOFTMAX_BYTES
    if p:
        fwd, bwd = fwd + ATTENTION_DROPOUT_BYTES[0], bwd + ATTENTION_DROPOUT_BYTES[1]
    if training.checkpointing == "selective":  # it recomputes exactly the attention core
        fwd *= 2
    elif training.checkpointing == "full":  # the forward again in the checkpointed layers
        fwd *= 1 + math.ceil(model.num_layers / training.checkpoint_every) / model.num_layers
    s = training.seq_len
    return (fwd + bwd) * model.num_heads / tp * s * s / cp * model.num_layers


# The loss over the vocabulary is memory-bound as well: bytes moved per logit per training step.
# "full" / "chunked" in eager kernels: the half logits upcast to fp32 (read 2, write 4), the
# log-softmax (8), and backward its gradient (12) and the downcast (6); compiled (compile_loss),
# the upcast, log-softmax and its gradient fuse into a read and a write each way; a fused linear
# cross-entropy reads the logits once and writes their gradient in place.
LOSS_BYTES_PER_LOGIT = {"eager": 36, "compiled": 12, "fused": 6}


def loss_bytes_per_token(model: ModelSpec, training: TrainingConfig, tp: int = 1) -> float:
    """Memory traffic of the loss per token on the last pipeline stage (vocabulary / tp)."""
    if training.loss == "fused":
        per_logit = LOSS_BYTES_PER_LOGIT["fused"]
    elif training.compile_loss:
        per_logit = LOSS_BYTES_PER_LOGIT["compiled"]
    else:
        per_logit = LOSS_BYTES_PER_LOGIT["eager"]
    return per_logit * model.vocab_size / tp


def memory_bound_seconds(model: ModelSpec, training: TrainingConfig, parallel: ParallelConfig,
                         tokens_per_gpu_group: int, gpu) -> float:
    """Seconds per step of the memory-bound kernels outside the matmul rate: materialised
    attention scores (attention_score_bytes, per layer of the GPU's stage) and the loss
    (loss_bytes_per_token, on the last stage), at the GPU's sustained memory bandwidth; 0 where
    a planning MFU covers the whole step (time_model_applies)."""
    if not time_model_applies(training, gpu):
        return 0.0
    sequences = tokens_per_gpu_group // training.seq_len
    moved = (attention_score_bytes(model, training, parallel.tp, parallel.cp) * sequences / parallel.pp
             + loss_bytes_per_token(model, training, parallel.tp) * tokens_per_gpu_group / parallel.cp)
    return moved / (gpu.memory_bandwidth_gbps * 1e9 * HBM_EFFICIENCY)


def bubble_fraction(pp: int, microbatches: int, interleave: int = 1, schedule: str = "1f1b") -> float:
    """1F1B: (p-1) idle slots out of (m+p-1); interleaved with v virtual stages per GPU the
    bubble shrinks v-fold: (p-1)/v out of m + (p-1)/v (Narayanan et al. 2021). ZB-H1 splits
    the backward into input (B) and weight (W) gradients and fills the bubble with W: (p-1)
    (T_F + T_B - T_W) idle instead of (p-1)(T_F + T_B + T_W), a third with T_F = T_B = T_W
    (Qi et al., Zero Bubble Pipeline Parallelism, 2024)."""
    if pp == 1:
        return 0.0
    idle = (pp - 1) / interleave
    if schedule == "zb-h1":
        idle /= 3
    return idle / (microbatches + idle)


def link_gbps(group_size: int, span_nodes: bool, link: Interconnect, per_node: int = 1) -> float:
    """Effective GB/s per GPU for a collective over `group_size` ranks, `per_node` of them in
    each node.

    A group that spans nodes runs its rings (NCCL channels) over every NIC its node members
    own: each member's traffic crosses nodes on one channel in `per_node` and rides NVLink (or
    PCIe) on the others, so the ring moves `per_node` x the per-GPU network rate, up to the
    link inside the node (nccl-tests: a DGX A100 with 8 x HDR 200 Gb/s reaches ~190 GB/s
    all-reduce bus bandwidth across nodes, not 25). A group with one member per node (the
    data-parallel group around TP 8, a pipeline hop) has its own GPU's share only."""
    if group_size <= 1:
        return float("inf")
    if span_nodes:
        if not link.inter_node_gbit:
            raise ValueError(
                "the job spans more than one node but the interconnect has no inter-node link;"
                " set inter_node_gbit (e.g. 400 for InfiniBand NDR)"
            )
        return min(link.inter_node_gbit / 8 * per_node, link.intra_node_gbps) * LINK_EFFICIENCY
    return link.intra_node_gbps * LINK_EFFICIENCY


def comm_bytes_per_step(
    model: ModelSpec, training: TrainingConfig, parallel: ParallelConfig,
    trainable_local: float, gathered_local: float, dtypes: CommDtypes,
) -> dict[str, float]:
    """Bytes each GPU sends per optimizer step, by kind (ring algorithms).

    dp: gradient all-reduce (DDP, ZeRO-1/2) or, with sharded weights, the all-gathers of the
    weights (forward, and backward again after resharding) and the gradient reduce-scatter,
    each micro-batch (FSDP and ZeRO-3 cannot keep gathered weights across micro-batches; ZeRO-2
    reduce-scatters each micro-batch and all-gathers the updated weights once); under HSDP
    over the shard group only. dp_replicate: HSDP's all-reduce of the reduce-scattered shard
    across the replicas. tp, pp, ep, cp: see below."""
    dp, cp = parallel.dp, parallel.cp
    mbs = training.grad_accum
    out = {"dp": 0.0, "dp_replicate": 0.0}
    ranks = dp * (cp if parallel.sharding in _FSDP else 1)
    if ranks > 1:
        sharded = parallel.sharding in ("zero3", "fsdp-full-shard", "fsdp-hybrid")
        if sharded:
            shard = min(ranks, parallel.hybrid_shard_size) if parallel.sharding == "fsdp-hybrid" else ranks
            ring = (shard - 1) / shard
            gathers = 2 if parallel.reshard_after_forward or parallel.sharding == "zero3" else 1
            per_mb = (gathers * gathered_local * dtypes.param + trainable_local * dtypes.reduce) * ring
            out["dp"] = per_mb * mbs
            replicas = ranks // shard
            if replicas > 1:
                shard_bytes = trainable_local / shard * dtypes.reduce
                out["dp_replicate"] = 2 * shard_bytes * (replicas - 1) / replicas * mbs
        elif parallel.sharding == "zero2":
            ring = (ranks - 1) / ranks
            out["dp"] = (trainable_local * dtypes.reduce * mbs + trainable_local * dtypes.param) * ring
        else:
            out["dp"] = 2 * trainable_local * dtypes.reduce * (ranks - 1) / ranks  # all-reduce
    out.update(activation_comm_bytes(model, training, parallel, dtypes.activation))
    return out


def activation_comm_bytes(model: ModelSpec, training: TrainingConfig, parallel: ParallelConfig,
                          act_bytes: float) -> dict[str, float]:
    """The traffic of activations per step (tp, pp, ep, cp): it does not depend on how model
    state is placed, only on the shapes, so it is known before any memory estimate."""
    tp, pp, cp = parallel.tp, parallel.pp, parallel.cp
    b, s, h, L = training.micro_batch, training.seq_len, model.hidden_size, model.num_layers
    mbs = training.grad_accum
    act = b * s // cp * h * act_bytes
    out = {"tp": 0.0, "pp": 0.0, "ep": 0.0, "cp": 0.0}
    if tp > 1:
        # 2 all-reduces forward + 2 backward per layer (SP: all-gather + reduce-scatter, same)
        out["tp"] = 4 * 2 * (tp - 1) / tp * act * (L / pp) * mbs
    if pp > 1:
        out["pp"] = 2 * act / tp * mbs  # activations forward, their gradients backward
    if model.is_moe and parallel.ep > 1:
        k, ep = model.experts_per_token, parallel.ep
        out["ep"] = 4 * act * k * (ep - 1) / ep * (L / pp) * mbs  # 2 all-to-all fwd, 2 bwd
    if cp > 1:
        # ring attention: each layer gathers the other ranks' k and v in forward, again in
        # backward, and sends their gradients back: 3 x (cp-1)/cp of the sequence's k, v
        kv = b * s * 2 * model.kv_dim / tp * act_bytes
        out["cp"] = 3 * kv * (cp - 1) / cp * (L / pp) * mbs
    return out


_FSDP = ("fsdp-full-shard", "fsdp-shard-grad-op", "fsdp-hybrid")


class CommDtypes:
    """Bytes per element on the wire: weights all-gathered, gradients reduced, activations."""

    __slots__ = ("param", "reduce", "activation")

    def __init__(self, param: float, reduce: float, activation: float) -> None:
        self.param, self.reduce, self.activation = param, reduce, activation


def dp_forward_share(parallel: ParallelConfig, trainable_local: float, gathered_local: float,
                     dtypes: CommDtypes) -> float:
    """Share of the sharded-weight traffic that happens in the forward pass (its all-gather,
    prefetched behind the forward compute); the rest (the backward all-gather and the
    reduce-scatter) hides behind the backward. 0 for gradient all-reduces."""
    if parallel.sharding not in ("zero3", "fsdp-full-shard", "fsdp-hybrid"):
        return 0.0
    gathers = 2 if parallel.reshard_after_forward or parallel.sharding == "zero3" else 1
    forward = gathered_local * dtypes.param
    total = gathers * forward + trainable_local * dtypes.reduce
    return forward / total if total else 0.0


def exposed_dp_seconds(dp_seconds: float, replicate_seconds: float, forward_share: float,
                       compute_seconds: float, overlap: float) -> float:
    """Data-parallel traffic not hidden: the forward all-gathers behind overlap x the forward
    (a third of the compute), the rest behind overlap x the backward (two thirds)."""
    forward = dp_seconds * forward_share
    backward = dp_seconds - forward + replicate_seconds
    return (max(0.0, forward - overlap * compute_seconds / 3)
            + max(0.0, backward - overlap * compute_seconds * 2 / 3))


def comm_dtypes(training: TrainingConfig, parallel: ParallelConfig, layout: str, gathered_linear_share: float
                ) -> CommDtypes:
    """fp32: 4 everywhere. DeepSpeed (master): half weights and gradients. autocast: DDP
    all-reduces the fp32 gradients; FSDP's MixedPrecision all-gathers half weights and reduces
    in fsdp_reduce_dtype. fsdp2: bf16 all-gather (the linear weights in float8 with
    float8_all_gather), reduce in fsdp_reduce_dtype."""
    if layout == "fp32":
        return CommDtypes(4, 4, 4)
    reduce = 4 if parallel.fsdp_reduce_dtype == "fp32" else 2
    if layout in ("master", "pure-half"):
        return CommDtypes(2, 2, 2)
    if layout == "autocast":
        return CommDtypes(2, reduce if parallel.sharding in _FSDP else 4, 2)
    param = 2.0
    if training.float8_all_gather:
        param = gathered_linear_share * 1 + (1 - gathered_linear_share) * 2
    return CommDtypes(param, reduce, 2)


def comm_seconds(
    comm: dict[str, float], parallel: ParallelConfig, link: Interconnect
) -> dict[str, float]:
    """Seconds of each kind of communication per step. Ranks are laid out TP innermost, then
    CP, then the data-parallel shard group, its replicas and PP (torchtitan's mesh order): a
    group spans nodes when its ranks and the ranks inside them do not fit in one node."""
    rates = _link_rates(parallel, link)
    return {k: (volume / rates[k] if volume else 0.0) for k, volume in comm.items()}


@lru_cache(maxsize=8192)
def _link_rates(parallel: ParallelConfig, link: Interconnect) -> dict[str, float]:
    """Bytes per second per GPU of each kind's collective (comm_seconds), per layout and link."""
    g = link.gpus_per_node
    tp, dp, pp, ep, cp = parallel.tp, parallel.dp, parallel.pp, parallel.ep, parallel.cp
    ranks = dp * (cp if parallel.sharding in _FSDP else 1)
    shard = min(ranks, parallel.hybrid_shard_size) if parallel.sharding == "fsdp-hybrid" else ranks
    inner = tp * (1 if parallel.sharding in _FSDP else cp)  # ranks inside one data-parallel rank
    groups = {  # kind: (ranks, whether they span nodes, ranks of the group in one node)
        "dp": (shard, inner * shard > g, g // inner),
        "dp_replicate": (ranks // shard, inner * ranks > g, g // (inner * shard)),
        "tp": (tp, tp > g, g),
        "cp": (cp, tp * cp > g, g // tp),
        # a stage hop leaves through the sending GPU's own share; some hop crosses nodes as soon
        # as the job does
        "pp": (pp, parallel.world_size > g, 1),
        "ep": (ep, tp * ep > g, 1),  # all-to-all: each rank's own traffic leaves through its share
    }
    out = {}
    for k, (size, span, per_node) in groups.items():
        try:
            out[k] = link_gbps(size, span, link, max(1, min(size, per_node))) * 1e9
        except ValueError as exc:  # spans nodes without a network: raised when there is traffic
            out[k] = _NoLink(exc)
    return out


class _NoLink(float):
    """A rate for a group that spans nodes over no network: dividing a volume by it raises."""

    def __new__(cls, exc: ValueError):
        obj = super().__new__(cls, 0.0)
        obj.exc = exc
        return obj

    def __rtruediv__(self, volume):
        raise self.exc


def exposed_tp_seconds(tp_seconds: float, compute_seconds: float, parallel: ParallelConfig) -> float:
    """TP collectives sit between dependent matmuls. Async TP decomposes the forward's
    all-gather / reduce-scatter and its matmul into tp chunks and overlaps chunk i's transfer
    with chunk i-1's matmul (Wang et al. 2022; PyTorch async TP): one chunk stays exposed, the
    rest hides behind the forward's matmuls. The backward's collectives (half the traffic) stay
    exposed: PyTorch reports ~20 % forward and ~8 % end-to-end speed-up for Llama 3 70B
    ("Introducing Async Tensor Parallelism in PyTorch", 2024)."""
    if not parallel.async_tp or not tp_seconds:
        return tp_seconds
    forward = tp_seconds / 2
    first = forward / parallel.tp
    return tp_seconds - forward + first + max(0.0, forward - first - compute_seconds / 3)


def offload_seconds(parallel: ParallelConfig, shard_elems: float, gathered_elems: float, microbatches: int,
                    pcie_gbps: float, ranks_per_node: int, compute_seconds: float) -> float:
    """Exposed seconds per step of CPU offload (0 without offload).

    optimizer: the fp32 gradient partition goes to the host during backward (hidden behind it
    as ZeRO-Offload overlaps them), the host steps it (CPU-Adam for DeepSpeed, torch AdamW for
    FSDP) sharing the node's memory bandwidth with the node's other ranks, and the updated
    half weights come back. optimizer+params: also the weight shards come up for every
    all-gather (forward and backward of each micro-batch) and the gradient shards go down,
    behind the compute where prefetching lets them."""
    if parallel.offload == "none":
        return 0.0
    link = pcie_gbps * PCIE_EFFICIENCY * 1e9
    host = HOST_ADAM_BYTES_PER_SECOND / ranks_per_node
    slowdown = TORCH_CPU_ADAM_SLOWDOWN if parallel.sharding in _FSDP else 1.0
    step = shard_elems * CPU_ADAM_BYTES_PER_PARAM * slowdown / host
    down = shard_elems * 4 / link
    up = shard_elems * 2 / link
    backward = compute_seconds * 2 / 3
    exposed = step + up + max(0.0, down - backward)
    if parallel.offload == "optimizer+params":
        moved = (2 * gathered_elems * 4 + shard_elems * 4) * microbatches / link
        exposed += max(0.0, moved - DP_OVERLAP * compute_seconds)
    return exposed
