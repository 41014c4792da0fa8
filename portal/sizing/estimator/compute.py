"""FLOPs, step time (MFU model), communication volume and time, pipeline bubble."""

from __future__ import annotations

from functools import lru_cache

from .config import Interconnect, ParallelConfig, TrainingConfig
from .models import ModelSpec, arch_scale, param_tensors

# MFU = achieved model FLOPs / dense peak. Planning values from public reports: GPT-NeoX
# 150-180 TFLOP/s on A100 (48-58 %), Llama 3 405B 38-43 % on H100, Megatron 175B/530B
# 52-56 % (Korthikanti). FP8 runs reach a lower fraction of their doubled peak.
MFU_BY_PRECISION = {"fp32": 0.50, "half": 0.45, "fp8": 0.35}
LINK_EFFICIENCY = 0.80  # NCCL bus bandwidth / link bandwidth (nccl-tests, large messages)
DP_OVERLAP = 0.90  # share of data-parallel communication hidden behind the backward pass
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
    """Model FLOPs plus recomputation; LoRA skips the frozen weights' weight-gradient (2N)."""
    flops = model_flops_per_token(model, training.seq_len)
    if training.finetune != "full":
        flops *= 4 / 6
    if training.checkpointing == "full":
        flops *= RECOMPUTE_FACTOR
    return flops


def mfu(training: TrainingConfig) -> float:
    if training.mfu is not None:
        return training.mfu
    if training.precision == "fp32":
        return MFU_BY_PRECISION["fp32"]
    return MFU_BY_PRECISION["fp8" if training.precision == "fp8" else "half"]


def bubble_fraction(pp: int, microbatches: int) -> float:
    """1F1B: (p-1) idle slots out of (m+p-1)."""
    return (pp - 1) / (microbatches + pp - 1) if pp > 1 else 0.0


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
