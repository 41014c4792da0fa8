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
MATMUL_EFFICIENCY = (
    ("GH200", 828.6 / 989), ("GB200", 1822.0 / 2500), ("H200", 794.5 / 989 * 1453.4 / 1402.6),
    ("H100", 794.5 / 989), ("A100 80GB PCIe", 252.9 / 312), ("A100 40GB PCIe", 252.9 / 312),
    ("A100", 271.2 / 312), ("B300", 1769.0 / 2250), ("B200", 1745.0 / 2250),
)
DEFAULT_MATMUL_EFFICIENCY = 0.70
FP8_MATMUL_EFFICIENCY = (  # same source, fp8 measured / fp8 peak
    ("GB200", 3615.6 / 5000), ("H200", 1453.4 / 1979), ("H100", 1402.6 / 1979), ("B200", 3432.5 / 4500),
)
FP8_CAST_TRAFFIC = 0.3  # float8 scaling: amax, scale and cast of inputs, weights and grads
# The time model (docs/sizing.md "Time"): a step reaches U of the achievable matmul rate on
# its matmuls and spends memory-bound time on norms, activations, residuals and the optimizer
# in proportion to the hidden size h, so utilisation = eff * U / (1 + h0 * r / h), with r the
# GPU's FLOP/byte ratio relative to the A100's. U and h0 are per kernel stack, from its public
# runs: fused (FlashAttention's GPT-3 training, llm-foundry), megatron (Megatron-LM 2021-22),
# compiled (torch.compile), eager (plain PyTorch modules).
A100_FLOPS_PER_BYTE = 312e12 / 2039e9
STACK_EFFICIENCY = {  # stack: (U, h0)
    "fused": (0.83, 390.0),
    "megatron": (0.80, 390.0),
    "compiled": (0.78, 520.0),
    "eager": (0.72, 1000.0),
}
LAYER_LAUNCH_SECONDS = {"fused": 60e-6, "megatron": 60e-6, "compiled": 60e-6, "eager": 200e-6}
PIPELINE_MICROBATCH_SECONDS = 0.5e-3  # per micro-batch per stage: p2p send/recv and schedule
LINK_EFFICIENCY = 0.80  # NCCL bus bandwidth / link bandwidth (nccl-tests, large messages)
DP_OVERLAP = 0.90  # share of data-parallel communication hidden behind the backward pass
# Megatron-LM 2021-22 all-reduced gradients after the backward pass (no overlap until 2023).
DP_OVERLAP_BY_STACK = {"megatron": 0.0}
RECOMPUTE_FACTOR = 4 / 3  # full recompute: one more forward (2N of 6N)


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
    checkpointed layers; op-level SAC re-runs the matmuls it does not save (wk, wo, w3)."""
    base = model_flops_per_token(model, training.seq_len)
    flops = base * (4 / 6 if training.finetune != "full" else 1)
    if training.checkpointing == "full":
        share = math.ceil(model.num_layers / training.checkpoint_every) / model.num_layers
        flops += base / 3 * share
    elif training.checkpointing == "selective-op":
        from .activations import op_sac_recompute_matmul_params
        flops += 2 * op_sac_recompute_matmul_params(model) * model.num_layers * arch_scale(model)
    return flops


def matmul_efficiency(gpu_name: str) -> float:
    for fragment, eff in MATMUL_EFFICIENCY:
        if fragment.lower() in gpu_name.lower():
            return eff
    return DEFAULT_MATMUL_EFFICIENCY


def mfu(training: TrainingConfig, model: ModelSpec | None = None, gpu=None, tp: int = 1) -> float:
    """Share of the dense peak the step's hardware FLOPs reach (HFU).

    With a model and a GPU that states its memory bandwidth: the time model above, by GPU,
    kernel stack and the per-GPU hidden size (h / tp). Otherwise the planning constants."""
    if training.mfu is not None:
        return training.mfu
    if training.precision == "fp32":
        return MFU_BY_PRECISION["fp32"]
    if model is None or gpu is None or not gpu.memory_bandwidth_gbps:
        return MFU_BY_PRECISION["fp8" if training.precision == "fp8" else "half"]
    return _utilisation(training.kernel_stack, model.hidden_size, tp, gpu)


@lru_cache(maxsize=4096)
def _utilisation(stack: str, hidden: int, tp: int, gpu) -> float:
    u, h0 = STACK_EFFICIENCY[stack]
    return matmul_efficiency(gpu.name) * u / (1 + _memory_bound_share(h0, hidden, tp, gpu))


def _memory_bound_share(h0: float, hidden: int, tp: int, gpu) -> float:
    ratio = gpu.bf16_tflops * 1e12 / (gpu.memory_bandwidth_gbps * 1e9) / A100_FLOPS_PER_BYTE
    return h0 * ratio * tp / hidden


def memory_bound_share(training: TrainingConfig, model: ModelSpec, gpu, tp: int = 1) -> float:
    """Memory-bound time per unit of matmul time: h0 * r / (h / tp)."""
    return _memory_bound_share(STACK_EFFICIENCY[training.kernel_stack][1], model.hidden_size, tp, gpu)


def fp8_time_factor(training: TrainingConfig, model: ModelSpec, gpu, tp: int = 1) -> float:
    """Step time under float8 / the same step in bf16. The linear layers' matmuls run at the
    measured fp8 matmul rate, attention stays bf16, and the memory-bound part grows by the
    scaling casts."""
    return _fp8_time_factor(training.kernel_stack, training.seq_len, model, gpu, tp)


@lru_cache(maxsize=1024)
def _fp8_time_factor(stack: str, seq_len: int, model: ModelSpec, gpu, tp: int) -> float:
    training = TrainingConfig(seq_len=seq_len, stack=stack)
    attention = 12 * model.num_layers * model.q_dim * training.seq_len
    total = model_flops_per_token(model, training.seq_len)
    bf16 = gpu.bf16_tflops * matmul_efficiency(gpu.name)
    fp8_eff = next((e for f, e in FP8_MATMUL_EFFICIENCY if f.lower() in gpu.name.lower()),
                   matmul_efficiency(gpu.name) * 0.88)
    matmul = ((total - attention) * bf16 / (gpu.fp8_tflops * fp8_eff) + attention) / total
    share = memory_bound_share(training, model, gpu, tp)
    return (matmul + share * (1 + FP8_CAST_TRAFFIC)) / (1 + share)


def bubble_fraction(pp: int, microbatches: int, interleave: int = 1) -> float:
    """1F1B: (p-1) idle slots out of (m+p-1); interleaved with v virtual stages per GPU the
    bubble shrinks v-fold: (p-1)/v out of m + (p-1)/v (Narayanan et al. 2021)."""
    if pp == 1:
        return 0.0
    idle = (pp - 1) / interleave
    return idle / (microbatches + idle)


def link_gbps(group_size: int, span_nodes: bool, link: Interconnect) -> float:
    """Effective GB/s per GPU for a collective over `group_size` ranks."""
    if group_size <= 1:
        return float("inf")
    if span_nodes:
        if not link.inter_node_gbit:
            raise ValueError(
                "the job spans more than one node but the interconnect has no inter-node link;"
                " set inter_node_gbit (e.g. 400 for InfiniBand NDR)"
            )
        return link.inter_node_gbit / 8 * LINK_EFFICIENCY
    return link.intra_node_gbps * LINK_EFFICIENCY


def comm_bytes_per_step(
    model: ModelSpec, training: TrainingConfig, parallel: ParallelConfig,
    trainable_local: float, compute_bytes: int,
) -> dict[str, float]:
    """Bytes each GPU sends per optimizer step, by kind (ring algorithms)."""
    dp, tp, pp = parallel.dp, parallel.tp, parallel.pp
    b, s, h, L = training.micro_batch, training.seq_len, model.hidden_size, model.num_layers
    mbs = training.grad_accum
    act = b * s * h * compute_bytes
    out = {"dp": 0.0, "tp": 0.0, "pp": 0.0, "ep": 0.0}
    if dp > 1:
        ring = (dp - 1) / dp
        grads = trainable_local * compute_bytes
        if parallel.sharding in ("zero3", "fsdp-full-shard", "fsdp-hybrid"):
            out["dp"] = 3 * grads * ring  # all-gather fwd + all-gather bwd + reduce-scatter
        else:
            out["dp"] = 2 * grads * ring  # all-reduce (= reduce-scatter + all-gather)
    if tp > 1:
        # 2 all-reduces forward + 2 backward per layer (SP: all-gather + reduce-scatter, same)
        out["tp"] = 4 * 2 * (tp - 1) / tp * act * (L / pp) * mbs
    if pp > 1:
        out["pp"] = 2 * act / tp * mbs  # activations forward, their gradients backward
    if model.is_moe and parallel.ep > 1:
        k, ep = model.experts_per_token, parallel.ep
        out["ep"] = 4 * act * k * (ep - 1) / ep * (L / pp) * mbs  # 2 all-to-all fwd, 2 bwd
    return out


def comm_seconds(
    comm: dict[str, float], parallel: ParallelConfig, link: Interconnect
) -> dict[str, float]:
    """Seconds of each kind of communication per step; a group spans nodes when it does not fit
    in one node's GPUs (DP and PP groups are laid out after TP)."""
    g = link.gpus_per_node
    tp, dp, pp, ep = parallel.tp, parallel.dp, parallel.pp, parallel.ep
    out = {}
    for k, volume in comm.items():
        if not volume:
            out[k] = 0.0
            continue
        if k == "dp":
            size, span = dp, (tp * dp > g if dp > 1 else False)
        elif k == "tp":
            size, span = tp, tp > g
        elif k == "pp":
            size, span = pp, tp * dp * pp > g and tp * dp >= g
        else:
            size, span = ep, tp * ep > g
        out[k] = volume / (link_gbps(size, span, link) * 1e9)
    return out
