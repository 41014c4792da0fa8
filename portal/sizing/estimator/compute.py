"""FLOPs, step time (MFU model), communication volume and time, pipeline bubble."""

from __future__ import annotations

import math
from functools import lru_cache

from .activations import dora_linears, op_sac_recompute_matmul_params
from .config import FSDP_SHARDING, WEIGHT_SHARDING, Interconnect, ParallelConfig, TrainingConfig
from .memory import mixed_layout
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
# compiled (torch.compile), eager (plain PyTorch modules). The fused, compiled and eager U were
# set again on the calibration split when attention got its own kernel rate on Hopper
# (attention_slowdown): each to the U that keeps its calibration rows' median signed error where
# it was (fused -2.2 %, compiled +1.8 %, eager -6.2 %; they were 0.77, 0.78, 0.72), since the H100
# runs they were set on had paid FlashAttention-2's slower attention inside U.
A100_FLOPS_PER_BYTE = 312e12 / 2039e9
STACK_EFFICIENCY = {  # stack: (U, h0)
    "fused": (0.81, 390.0),
    "megatron": (0.73, 200.0),
    "compiled": (0.88, 520.0),
    "eager": (0.80, 1000.0),
}
# Megatron-Core (2023-) runs Transformer Engine's fused kernels (fused attention, fused
# norm/bias/activation/rotary) -- the kernel class of the "fused" stack -- where Megatron-LM
# 2021-22 ran its own fused softmax over materialised scores ("megatron"): its constants are the
# fused stack's, not fitted to its own runs.
STACK_EFFICIENCY["megatron-core"] = STACK_EFFICIENCY["fused"]
LAYER_LAUNCH_SECONDS = {"fused": 60e-6, "megatron": 60e-6, "megatron-core": 60e-6, "compiled": 60e-6,
                        "eager": 200e-6}
PIPELINE_MICROBATCH_SECONDS = 0.5e-3  # per micro-batch per stage: p2p send/recv and schedule
LINK_EFFICIENCY = 0.80  # NCCL bus bandwidth / link bandwidth (nccl-tests, large messages)
DP_OVERLAP = 0.90  # share of data-parallel communication hidden behind the backward pass
# Megatron-LM 2021-22 all-reduced gradients after the backward pass (no overlap until 2023);
# Megatron-Core overlaps them (overlap_grad_reduce / overlap_param_gather).
DP_OVERLAP_BY_STACK = {"megatron": 0.0}
# Communication hidden behind compute still slows it: NCCL's kernels hold SMs (a CTA per channel)
# and HBM bandwidth while the kernels they overlap run. Overlapped with communication, compute ran
# 18.9 % slower on average (40.0 % at most) than alone, over GPT and LLaMA training on A100, H100,
# MI250 and MI210 ("Characterizing Compute-Communication Overlap in GPU-Accelerated Distributed
# Deep Learning", arXiv 2507.03114, 2025). The compute under a hidden transfer runs as long as the
# transfer does, so each hidden second of it costs this share of a second.
OVERLAP_SLOWDOWN = 0.189
# CPU offload (docs/sizing.md "Offload"): the optimizer step on the host streams the shard's
# weights, gradients and both moments. Element passes per parameter (in units of one state
# element, 4 B fp32 or 2 B bf16): a fused step (DeepSpeedCPUAdam's Step_AVX, torch's
# _fused_adamw_ CPU kernel) reads weight, gradient and both moments and writes weight and moments
# back: 7; torch.optim.AdamW's single-tensor loop (torch/optim/adam.py _single_tensor_adam,
# what AdamW runs on CPU tensors: foreach and fused only default on CUDA) runs each op as its
# own pass: weight decay mul_ (2), exp_avg lerp_ (3), exp_avg_sq mul_ (2) and addcmul_ (3),
# sqrt, division and add_ building denom (2 each: new tensors), addcdiv_ (4): 20.
ADAM_PASSES = {"fused": 7, "single-tensor": 20}
# One core's arithmetic: an AdamW element costs a square root and a division besides a handful of
# FMAs; on AVX-512 (Skylake-SP and later, Agner Fog's instruction tables) vsqrtps and vdivps zmm
# issue every 12 and 10 cycles, the FMAs on two ports: ~25 cycles per 16-lane vector, 50 per
# 8-lane AVX2 vector (half the lanes for the same instruction costs).
ADAM_CYCLES_PER_VECTOR = 25.0
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
    # the attention its kernels run: sliding-window layers take their own share (attention_layers)
    base += 12 * (attention_layers(model, training) - model.num_layers) * model.q_dim * training.seq_len
    flops = base * (4 / 6 if training.finetune != "full" else 1)
    if training.checkpointing == "full":
        # the checkpointed decoder layers run their forward again; the output head does not
        flops += ((base - 6 * model.vocab_size * model.hidden_size * arch_scale(model)) / 3
                  * (forward_runs(model, training) - 1))
    elif training.checkpointing == "selective-op":
        flops += 2 * op_sac_recompute_matmul_params(model) * model.num_layers * arch_scale(model)
    return flops + dora_dropout_flops_per_token(model, training)


def forward_runs(model: ModelSpec, training: TrainingConfig) -> float:
    """How many times a layer's forward runs per micro-batch, on average over the layers (full
    recompute runs the checkpointed layers' again)."""
    if training.checkpointing != "full":
        return 1.0
    return 1 + math.ceil(model.num_layers / training.checkpoint_every) / model.num_layers


def dora_dropout_flops_per_token(model: ModelSpec, training: TrainingConfig) -> float:
    """With LoRA dropout, PEFT's DoRA runs each adapted linear's frozen matmul again on the
    dropped input (variants.py DoraLinearVariant.forward passes no base_result; dora.py
    F.linear(x, W)): 2 FLOPs a weight per forward run, and 2 for the input's gradient."""
    if training.lora_dropout == 0:
        return 0.0
    weights = sum(d_out * d_in for d_out, d_in in dora_linears(model, training))
    return 2 * weights * (forward_runs(model, training) + 1) * model.num_layers


# PEFT's DoRA in eager kernels, beyond LoRA's (tuners/lora/dora.py and variants.py at 5d602fd), per
# adapted linear: the bytes its kernels read and write per element of the identity it runs
# through the adapter (d_in^2) and of the weight, at every forward (the weight norm ||W + s * BA||
# worked out anew: BA; s * BA; W + s * BA; the norm's read), and per output element and token,
# forward and backward (the magnitude scaling the base and adapter outputs; its gradient from
# both; the base output's gradient added twice). By the adapters' layout: one half dtype
# throughout; fp32; fp32 under autocast, which casts the identity and BA to the half type and back
# and promotes the output ops to fp32. Counted op by op in tests/sizing/test_dora.py.
DORA_BYTES = {"half": (4, 14, 14, 30), "fp32": (8, 28, 28, 60), "autocast": (12, 32, 38, 78)}
# With LoRA dropout DoRA gets no base output: it runs the frozen matmul again on the dropped input
# (its FLOPs: dora_dropout_flops_per_token). What that changes in the bytes above, per element of
# the weight and of the input per token (forward: the half casts autocast makes for that matmul),
# of the output and of the input per token (backward: the base output's gradient is no longer
# added twice, the input's gradient is added from the second matmul).
DORA_DROPOUT_BYTES = {"half": (0, 0, -6, 6), "fp32": (0, 0, -12, 12), "autocast": (6, 6, -6, 18)}


def dora_bytes_per_microbatch(model: ModelSpec, training: TrainingConfig, parallel: ParallelConfig) -> float:
    """DoRA's memory traffic per micro-batch on one GPU (the layers of its pipeline stage, the
    tokens of its context-parallel share); 0 without use_dora."""
    linears = dora_linears(model, training)
    if not linears:
        return 0.0
    layout = mixed_layout(training, parallel)
    layout = layout if layout in ("fp32", "autocast") else "half"
    identity, weight, fwd, bwd = DORA_BYTES[layout]
    weight_d, fwd_in, bwd_d, bwd_in = DORA_DROPOUT_BYTES[layout] if training.lora_dropout else (0, 0, 0, 0)
    runs = forward_runs(model, training)
    tokens = training.micro_batch * training.seq_len / parallel.cp
    per_layer = sum(runs * (identity * d_in ** 2 + (weight + weight_d) * d_out * d_in
                            + tokens * (fwd * d_out + fwd_in * d_in))
                    + tokens * ((bwd + bwd_d) * d_out + bwd_in * d_in) for d_out, d_in in linears)
    return per_layer * math.ceil(model.num_layers / parallel.pp)


def dora_seconds(model: ModelSpec, training: TrainingConfig, parallel: ParallelConfig,
                 tokens_per_gpu_group: int, gpu) -> float:
    """DoRA's traffic per step at the GPU's sustained memory bandwidth. It counts under a planning
    MFU too (fp32), which was set on steps without it; not under an MFU the caller gives."""
    if not training.use_dora or training.mfu is not None or gpu is None or not gpu.memory_bandwidth_gbps:
        return 0.0
    microbatches = tokens_per_gpu_group / (training.micro_batch * training.seq_len)
    moved = dora_bytes_per_microbatch(model, training, parallel) * microbatches
    return moved / (gpu.memory_bandwidth_gbps * 1e9 * HBM_EFFICIENCY)


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



# Tensor parallelism narrows the matmuls. A GEMM of M tokens by an N x K weight does 2MNK FLOPs
# over 2(MK + KN + MN) bytes of operands: its arithmetic intensity MNK/(MK + KN + MN) falls with
# the narrowest dimension (NVIDIA, "Matrix Multiplication Background User's Guide"). TP splits N
# of the column-parallel linears (q, k, v, gate, up) and K of the row-parallel ones (o, down) by
# tp, while every rank still reads or writes the whole activation (M x h): per FLOP it moves tp
# times the activation bytes. The time a GEMM takes is its math plus the operand traffic its
# tiles do not hide; taking that traffic as unhidden (math and traffic added, as a kernel that
# waits for its operands does), a linear costs F (1 + ridge / I) with ridge the GPU's peak
# FLOP/s over its memory bandwidth. The stack constants were measured on runs at TP 1, so only
# the ratio to the same GEMMs at TP 1 (and the whole sequence: context parallelism shortens M)
# enters: narrowing_factor >= 1 multiplies the matmul time.
ROW_PARALLEL = ("o_proj", "down_proj", "c_proj", "output.dense")


def narrowing_factor(model: ModelSpec, tokens: int, tp: int, cp: int, gpu) -> float:
    """Matmul time of the layer linears at TP tp over M = tokens / cp per GEMM, relative to the
    same linears at TP 1 over all the tokens (1.0 at tp = cp = 1)."""
    if tp == 1 and cp == 1:
        return 1.0
    ridge = gpu.bf16_tflops * 1e12 / (gpu.memory_bandwidth_gbps * 1e9)
    return _narrowing(model, tokens, tp, cp, ridge)


@lru_cache(maxsize=4096)
def _narrowing(model: ModelSpec, tokens: int, tp: int, cp: int, ridge: float) -> float:
    def cost(t, m: float, split: int) -> float:
        out, inp = t.shape
        if t.expert:
            m = m * model.experts_per_token / model.num_experts
        n, k = (out, inp / split) if t.name.endswith(ROW_PARALLEL) else (out / split, inp)
        intensity = 1 / (1 / m + 1 / n + 1 / k)
        return out * inp * t.count * (1 + ridge / intensity)  # FLOPs share x (1 + ridge / I)

    linears = [t for t in param_tensors(model) if t.group == "layer" and t.kind == "linear"]
    narrow = sum(cost(t, max(1.0, tokens / cp), tp) for t in linears)
    wide = sum(cost(t, float(tokens), 1) for t in linears)
    return narrow / wide if wide else 1.0


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
# Soft-capping, cap * tanh(x / cap) in three eager kernels (Gemma 2's scores and logits): forward
# divide, tanh and multiply read and write a half element each (12); backward the multiply's and
# divide's gradients (4 each) and tanh's, which reads its output too (6)
SOFTCAP_BYTES = (12, 14)
HBM_EFFICIENCY = 0.80  # sustained / datasheet memory bandwidth on streaming kernels


def attention_score_bytes(model: ModelSpec, training: TrainingConfig, tp: int = 1, cp: int = 1) -> float:
    """Memory traffic of materialised attention scores per sequence on one GPU (all its layers
    of a model-parallel shard: heads / tp, queries / cp); 0 under SDPA or flash attention."""
    if training.attention != "eager":
        return 0.0
    p = training.dropout_for(model)
    fwd, bwd = SOFTMAX_BYTES
    if p:
        fwd, bwd = fwd + ATTENTION_DROPOUT_BYTES[0], bwd + ATTENTION_DROPOUT_BYTES[1]
    if model.softcap_scores:
        fwd, bwd = fwd + SOFTCAP_BYTES[0], bwd + SOFTCAP_BYTES[1]
    if training.checkpointing == "selective":  # it recomputes exactly the attention core
        fwd *= 2
    elif training.checkpointing == "full":  # the forward again in the checkpointed layers
        fwd *= forward_runs(model, training)
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
    if model.softcap_logits and training.loss != "fused":  # the model's own eager kernels cap them
        per_logit += sum(SOFTCAP_BYTES)
    return per_logit * model.vocab_size / tp



# Context parallelism as PyTorch runs it (torch.distributed.tensor.experimental._attention,
# _templated_ring_attention and its backward; torchtitan's CP): each of the cp ring steps runs
# its block of attention as its own SDPA call and folds the block into the running output in
# fp32 (_SDPAMerger with convert_to_f32): the block's output cast to fp32 (2 B read, 4 written),
# out - block_out (12), times sigmoid(lse difference) (8) and out minus that (12): 38 B per output
# element and merged step, on the rank that merges every step whole (the load-balanced ring's
# last rank; the others merge half blocks and concatenate: less); the result cast back: 6.
# Backward, every step adds its block's bf16 gradient into fp32 accumulators (grad_query +=:
# 2 + 4 read, 4 written: 10 B per q element) and updates the fp32 k, v gradients it received and
# flattens them into the next send (a partial update by concatenation, 8, half an add, 5, and the
# flattening cat, 8: 21 B per k, v element), both cast back at the end (6).
CP_MERGE_BYTES = 38
CP_CAST_BYTES = 6
CP_GRAD_Q_BYTES = 10
CP_GRAD_KV_BYTES = 21


def cp_memory_bound_bytes(model: ModelSpec, training: TrainingConfig, parallel: ParallelConfig) -> float:
    """Bytes per sequence that ring attention's merges and gradient accumulations move on one GPU
    (every layer of its stage; the forward again in layers full checkpointing recomputes); 0
    without context parallelism."""
    cp = parallel.cp
    if cp == 1:
        return 0.0
    s_local = training.seq_len / cp
    q = s_local * model.q_dim / parallel.tp
    kv = s_local * 2 * model.kv_dim / min(parallel.tp, model.num_kv_heads)
    forward = ((cp - 1) * CP_MERGE_BYTES + CP_CAST_BYTES) * q
    if training.checkpointing == "full":
        forward *= 1 + math.ceil(model.num_layers / training.checkpoint_every) / model.num_layers
    backward = cp * (CP_GRAD_Q_BYTES * q + CP_GRAD_KV_BYTES * kv) + CP_CAST_BYTES * (q + kv)
    return (forward + backward) * math.ceil(model.num_layers / parallel.pp)


def attention_flops_per_token(model: ModelSpec, training: TrainingConfig) -> float:
    """Hardware FLOPs per token of the attention scores and their use (12 L d s, PaLM App. B),
    with the forward again in the layers full checkpointing recomputes."""
    layers = attention_layers(model, training)
    flops = 12 * layers * model.q_dim * training.seq_len
    if training.checkpointing == "full":
        share = math.ceil(model.num_layers / training.checkpoint_every) / model.num_layers
        flops += 4 * layers * model.q_dim * training.seq_len * share
    return flops


def attention_layers(model: ModelSpec, training: TrainingConfig) -> float:
    """The layers' attention in causal layers' worth. A sliding-window layer (Mistral, Gemma 3 …)
    under FlashAttention-2 skips the blocks outside its window: each query sees at most the
    window, where a causal one sees all before it. Under SDPA, once the sequence reaches the
    window, the layer runs on transformers' mask, not is_causal, so the kernel computes the whole
    s x s square, twice a causal layer's blocks (activations.sliding_window_masks). Eager computes
    the square for every layer already."""
    full = model.num_layers - model.sliding_layers
    s, window = training.seq_len, model.sliding_window
    if not model.sliding_layers or s < window or training.attention == "eager":
        return float(model.num_layers)
    if training.attention == "flash":  # keys seen: w s - w^2 / 2 of a causal layer's s^2 / 2
        return full + model.sliding_layers * (2 * window * s - window * window) / (s * s)
    return full + 2.0 * model.sliding_layers


# Attention kernels by GPU generation. The stack constants were measured where fused attention
# ran close to GEMM efficiency (FlashAttention-2 on Ampere: "50-73 % of the theoretical maximum
# FLOP/s on A100, close to the efficiency of GEMM", Dao 2023), so the time model charges the
# attention FLOPs at its matmul rate. On Hopper a kernel written for Ampere does not use the
# asynchronous wgmma/TMA path and runs far below that: measured on H100 SXM5 at head dim 128 and
# 16k tokens (Shah et al. 2024, FlashAttention-3, Figures 5 and 7), TFLOP/s forward, backward:
# FlashAttention-2 370, 322; cuDNN 595, 516; FlashAttention-3 648, 561 (a Hopper kernel at 75 %
# of peak, GEMM-class: the time model's rate). A training step's attention is the forward and a
# backward of 2.5x its FLOPs (the backward recomputes the scores), so a kernel's attention takes
# the FlashAttention-3 rate over its own times the modelled time: FlashAttention-2 1.74x (what
# PyTorch's SDPA flash backend and flash-attn 2 run), cuDNN 1.09x (Transformer Engine's fused
# attention, what Megatron-Core runs on Hopper). Other GPUs: 1 (Ampere: the calibration; Blackwell
# has no published measurement of these kernels).
ATTENTION_KERNEL_TFLOPS_HOPPER = {"fa2": (370.0, 322.0), "cudnn": (595.0, 516.0), "fa3": (648.0, 561.0)}
FLASH_BACKWARD_FLOPS = 2.5  # backward FLOPs / forward FLOPs of a flash attention kernel
HOPPER_GPUS = ("H100", "H200", "GH200")


# PyTorch's SDPA runs cuDNN's attention first on sm90/sm100 once the runtime cuDNN is newer than
# 9.15 (aten/src/ATen/native/transformers/cuda/sdp_utils.cpp, check_prefer_cudnn_attention), at
# head dims up to 128 (a multiple of 8) while cuDNN is older than 9.22 (check_cudnn_tensor_shapes)
# and at a dropout probability that is a multiple of 1/16 (check_cudnn_dropout); flash otherwise.
# The torch the stacks pin (provisioning/stack/packages.py: 2.13.0, PyPI's CUDA 13.0 x86_64 wheel)
# requires nvidia-cudnn-cu13 9.20.0.48. Runs on older wheels (CUDA 12.x, cuDNN 9.15 or older) ran
# FlashAttention-2 there: attention_kernel="fa2" says so.
SDPA_CUDNN_MAX_HEAD_DIM = 128


def attention_kernel(training: TrainingConfig, model: ModelSpec) -> str:
    """The fused attention kernel a step runs on Hopper (the only GPUs whose attention rate
    depends on it; SDPA picks flash on Ampere and Ada): the one set, else the stack's own:
    Transformer Engine's cuDNN attention under Megatron-Core; PyTorch SDPA as the stacks pin it,
    cuDNN's where its shape and dropout allow, FlashAttention-2 else; flash-attn 2
    (attention="flash") its own."""
    if training.attention_kernel != "auto":
        return training.attention_kernel
    if training.kernel_stack == "megatron-core":
        return "cudnn"
    if (training.attention == "sdpa" and model.head_dim <= SDPA_CUDNN_MAX_HEAD_DIM
            and model.head_dim % 8 == 0 and float(training.dropout_for(model) * 16).is_integer()):
        return "cudnn"
    return "fa2"


def _kernel_rate(kernel: str) -> float:
    forward, backward = ATTENTION_KERNEL_TFLOPS_HOPPER[kernel]
    return (1 + FLASH_BACKWARD_FLOPS) / (1 / forward + FLASH_BACKWARD_FLOPS / backward)


def attention_slowdown(training: TrainingConfig, gpu, model: ModelSpec) -> float:
    """Attention time under the step's kernel over the time model's (its matmul rate): > 1 on
    Hopper for a kernel below FlashAttention-3's rate (FlashAttention-2 1.74, cuDNN 1.09); 1 for
    materialised attention (memory_bound_seconds costs it), on other GPUs and where a planning
    MFU covers the step."""
    if (training.attention == "eager" or not time_model_applies(training, gpu)
            or not any(g in gpu.name for g in HOPPER_GPUS)):
        return 1.0
    return _kernel_rate("fa3") / _kernel_rate(attention_kernel(training, model))


def cp_imbalance(parallel: ParallelConfig) -> float:
    """Extra attention time under causal masking without ring attention's load balancing: each
    ring step waits for the slowest rank, and at every step but the first some rank computes a
    whole block (the one holding the sequence's end computes every block the others skip), so
    the ring takes cp - 1/2 blocks of time where balanced ranks take cp/2 each:
    (2cp - 1)/cp of the balanced time, (cp - 1)/cp more (PyTorch _is_causal_behavior)."""
    if parallel.cp == 1 or parallel.cp_load_balance:
        return 0.0
    return (parallel.cp - 1) / parallel.cp


def exposed_cp_seconds(cp_seconds: float, latency_seconds: float, attention_seconds: float,
                       parallel: ParallelConfig) -> float:
    """Ring attention's traffic hides behind the attention blocks it feeds: the forward's k, v
    all-gather behind the local block, each step's k, v gradients behind the next block, so
    behind all but one of the cp blocks; each step's launch and wait (NCCL's latency) is
    serialised with its block and stays exposed; what hides slows the blocks (with_contention)."""
    if parallel.cp == 1:
        return cp_seconds
    hideable = max(0.0, cp_seconds - latency_seconds)
    return with_contention(cp_seconds, latency_seconds
                           + max(0.0, hideable - attention_seconds * (parallel.cp - 1) / parallel.cp))


def memory_bound_seconds(model: ModelSpec, training: TrainingConfig, parallel: ParallelConfig,
                         tokens_per_gpu_group: int, gpu) -> float:
    """Seconds per step of the memory-bound kernels outside the matmul rate: materialised
    attention scores (attention_score_bytes, per layer of the GPU's stage), the loss
    (loss_bytes_per_token, on the last stage) and ring attention's fp32 merges
    (cp_memory_bound_bytes), at the GPU's sustained memory bandwidth; 0 where a planning MFU
    covers the whole step (time_model_applies)."""
    if not time_model_applies(training, gpu):
        return 0.0
    sequences = tokens_per_gpu_group // training.seq_len
    moved = (attention_score_bytes(model, training, parallel.tp, parallel.cp) * sequences / parallel.pp
             + loss_bytes_per_token(model, training, parallel.tp) * tokens_per_gpu_group / parallel.cp
             + cp_memory_bound_bytes(model, training, parallel) * sequences)
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



# NCCL's own cost model (src/graph/tuning.cc, ncclTopoTuneModel, read at NVIDIA/nccl 5067397): a
# collective of the Simple protocol (what bandwidth-bound messages use) costs a base latency plus
# one hop latency per ring step, hops inside a node at the intra-node link's latency (at least
# the network overhead x 3 once the ring spans nodes) and hops between nodes at the network's.
# A ring all-gather or reduce-scatter over R ranks takes R - 1 steps, of which nodes - 1 cross the
# network; an all-reduce twice that, or NCCL's tree: 2 x ((ranks per node - 1) intra hops +
# log2(nodes) network hops), whichever NCCL finds faster. Seconds.
NCCL_BASE_LATENCY = 8.4e-6  # baseLatencies, Ring and Tree, Simple
NCCL_RING_HOP = {"nvlink": 3.4e-6, "pcie": 5.7e-6, "net": 14.0e-6}  # hwLatencies, Ring, Simple
NCCL_TREE_HOP = {"nvlink": 4.0e-6, "pcie": 4.0e-6, "net": 14.0e-6}  # hwLatencies, Tree, Simple
NCCL_NET_OVERHEAD = 3 * 1.0e-6  # getNetOverhead() (1 us on x86 Intel hosts) x 3 for Simple


def collective_latency(kind: str, ranks: int, per_node: int, link: Interconnect) -> float:
    """Seconds one collective of `kind` costs besides its bytes, over `ranks` ranks with
    `per_node` of them in each node (NCCL's latency model): "gather" (ring all-gather or
    reduce-scatter), "allreduce" (ring or tree, the faster) or "p2p" (one send/receive)."""
    if ranks <= 1:
        return 0.0
    per_node = max(1, min(per_node, ranks))
    nodes = -(-ranks // per_node)
    intra_kind = "nvlink" if link.intra_kind == "nvlink" else "pcie"
    intra = NCCL_RING_HOP[intra_kind]
    if nodes > 1:
        intra = max(intra, NCCL_NET_OVERHEAD)
    inter = NCCL_RING_HOP["net"]
    if kind == "p2p":
        return NCCL_BASE_LATENCY + (inter if nodes > 1 else intra)
    if kind == "gather":
        return NCCL_BASE_LATENCY + (ranks - nodes) * intra + (nodes - 1) * inter
    ring = NCCL_BASE_LATENCY + 2 * (ranks - nodes) * intra + 2 * (nodes - 1) * inter
    tree = NCCL_BASE_LATENCY + 2 * ((ranks // nodes - 1) * NCCL_TREE_HOP[intra_kind]
                                    + math.log2(nodes) * NCCL_TREE_HOP["net"])
    return min(ring, tree)


DDP_BUCKET_BYTES = 25 * 2**20  # DistributedDataParallel(bucket_cap_mb=25): one all-reduce per bucket
MEGATRON_DP_BUCKET_PARAMS = {"megatron": lambda dp: 0,  # 0: the whole buffer in one all-reduce
                             "megatron-core": lambda dp: max(40_000_000, 1_000_000 * dp)}


def collective_calls(model: ModelSpec, training: TrainingConfig, parallel: ParallelConfig,
                     trainable_local: float, grad_bytes: float) -> dict[str, tuple[tuple[str, int], ...]]:
    """Collectives each GPU launches per optimizer step, by kind: ((collective, count), ...).

    dp: sharded weights (FSDP, ZeRO-3) gather every unit (each layer of the stage and the root)
    in forward (and again in backward after resharding) and reduce-scatter its gradients, each
    micro-batch; ZeRO-2 reduce-scatters each reduce bucket every micro-batch and all-gathers the
    updated weights bucket by bucket once; DDP (25 MiB buckets) and ZeRO-1 all-reduce bucket by
    bucket once per step; Megatron-LM 2021-22 its whole gradient buffer at once, Megatron-Core
    by its buckets. dp_replicate (HSDP): an all-reduce per unit and micro-batch. tp: per layer and
    micro-batch two collectives forward and two backward (SP: each an all-gather and a
    reduce-scatter). pp: a send forward and one backward per micro-batch. cp: PyTorch's ring
    attention all-gathers k, v in forward (again in a recomputed forward) and in backward, and
    passes the k, v gradients on in one exchange per ring step (context_parallel
    _templated_ring_attention_backward). ep: four all-to-alls per layer and micro-batch."""
    mbs = training.grad_accum
    stage_layers = math.ceil(model.num_layers / parallel.pp)
    out: dict[str, tuple[tuple[str, int], ...]] = {}
    ranks = parallel.dp * (parallel.cp if parallel.sharding in FSDP_SHARDING else 1)
    stack = training.kernel_stack
    if ranks > 1 and stack in MEGATRON_DP_BUCKET_PARAMS and parallel.sharding in ("none", "zero1"):
        # Megatron-LM 2021-22 all-reduces its contiguous gradient buffer at once; Megatron-Core by
        # buckets of max(40M, 1M x dp) parameters (distributed_data_parallel.py), reduce-scattered
        # and all-gathered under its distributed optimizer
        bucket = MEGATRON_DP_BUCKET_PARAMS[stack](parallel.dp)
        buckets = max(1, math.ceil(trainable_local / bucket)) if bucket else 1
        out["dp"] = (("gather", 2 * buckets),) if parallel.sharding == "zero1" else (("allreduce", buckets),)
    elif ranks > 1 and parallel.sharding != "none":
        units = stage_layers + 1
        if parallel.sharding in WEIGHT_SHARDING:
            gathers = 2 if parallel.reshard_after_forward or parallel.sharding == "zero3" else 1
            reduces = grad_reductions(training, parallel)
            out["dp"] = (("gather", units * (gathers * mbs + reduces)),)
            if parallel.sharding == "fsdp-hybrid" and ranks > parallel.hybrid_shard_size:
                out["dp_replicate"] = (("allreduce", units * reduces),)
        elif parallel.sharding == "fsdp-shard-grad-op":
            out["dp"] = (("gather", units * 2 * mbs),)
        elif parallel.sharding == "zero2":
            buckets = max(1, math.ceil(trainable_local / parallel.zero.reduce_bucket_size))
            out["dp"] = (("gather", buckets * (mbs + 1)),)
        else:  # zero1: all-reduce per reduce bucket
            buckets = max(1, math.ceil(trainable_local / parallel.zero.reduce_bucket_size))
            out["dp"] = (("allreduce", buckets),)
    elif ranks > 1:  # DDP
        out["dp"] = (("allreduce", max(1, math.ceil(grad_bytes / DDP_BUCKET_BYTES))),)
    if parallel.tp > 1:
        out["tp"] = (("gather" if parallel.sp else "allreduce", 4 * stage_layers * mbs),)
    if parallel.pp > 1:
        out["pp"] = (("p2p", 2 * (parallel.pp_microbatches or mbs)),)
    if parallel.cp > 1:
        gathers = 2 + (1 if training.checkpointing == "full" else 0)
        out["cp"] = (("gather", gathers * stage_layers * mbs), ("p2p", parallel.cp * stage_layers * mbs))
    if model.is_moe and parallel.ep > 1:
        out["ep"] = (("p2p", 4 * stage_layers * mbs),)
    return out

def comm_bytes_per_step(
    model: ModelSpec, training: TrainingConfig, parallel: ParallelConfig,
    trainable_local: float, gathered_local: float, dtypes: CommDtypes,
) -> dict[str, float]:
    """Bytes each GPU sends per optimizer step, by kind (ring algorithms).

    dp: gradient all-reduce (DDP, ZeRO-1/2) or, with sharded weights, the all-gathers of the
    weights (forward, and backward again after resharding) and the gradient reduce-scatter,
    each micro-batch (FSDP and ZeRO-3 cannot keep gathered weights across micro-batches; ZeRO-2
    reduce-scatters each micro-batch and all-gathers the updated weights once; FSDP under
    no_sync reduce-scatters once per step: grad_reductions); under HSDP
    over the shard group only. dp_replicate: HSDP's all-reduce of the reduce-scattered shard
    across the replicas. tp, pp, ep, cp: see below."""
    dp, cp = parallel.dp, parallel.cp
    mbs = training.grad_accum
    out = {"dp": 0.0, "dp_replicate": 0.0}
    ranks = dp * (cp if parallel.sharding in FSDP_SHARDING else 1)
    if ranks > 1:
        sharded = parallel.sharding in WEIGHT_SHARDING
        if sharded:
            shard = min(ranks, parallel.hybrid_shard_size) if parallel.sharding == "fsdp-hybrid" else ranks
            ring = (shard - 1) / shard
            gathers = 2 if parallel.reshard_after_forward or parallel.sharding == "zero3" else 1
            reduces = grad_reductions(training, parallel)
            out["dp"] = (gathers * gathered_local * dtypes.param * mbs
                         + trainable_local * dtypes.reduce * reduces) * ring
            replicas = ranks // shard
            if replicas > 1:
                shard_bytes = trainable_local / shard * dtypes.reduce
                out["dp_replicate"] = 2 * shard_bytes * (replicas - 1) / replicas * reduces
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
        # ring attention (PyTorch): each layer all-gathers the other ranks' k and v in forward
        # (again in a recomputed forward) and in backward, and passes the accumulated k, v
        # gradients on at every one of the cp steps, in fp32 (convert_to_f32)
        kv = b * s * 2 * model.kv_dim / tp
        gathers = 2 + (1 if training.checkpointing == "full" else 0)
        out["cp"] = (gathers * kv * act_bytes * (cp - 1) / cp + kv * 4) * (L / pp) * mbs
    return out


class CommDtypes:
    """Bytes per element on the wire: weights all-gathered, gradients reduced, activations."""

    __slots__ = ("param", "reduce", "activation")

    def __init__(self, param: float, reduce: float, activation: float) -> None:
        self.param, self.reduce, self.activation = param, reduce, activation


def grad_reductions(training: TrainingConfig, parallel: ParallelConfig) -> int:
    """Gradient reduce-scatters of a sharded FSDP layout per step: one per micro-batch, or one
    per step under FSDP's no_sync() (ParallelConfig.fsdp_no_sync)."""
    return 1 if parallel.fsdp_no_sync else training.grad_accum


def dp_forward_share(parallel: ParallelConfig, trainable_local: float, gathered_local: float,
                     dtypes: CommDtypes, training: TrainingConfig) -> float:
    """Share of the sharded-weight traffic that happens in the forward pass (its all-gather,
    prefetched behind the forward compute); the rest (the backward all-gather and the
    reduce-scatter) hides behind the backward. 0 for gradient all-reduces."""
    if parallel.sharding not in WEIGHT_SHARDING:
        return 0.0
    gathers = 2 if parallel.reshard_after_forward or parallel.sharding == "zero3" else 1
    forward = gathered_local * dtypes.param * training.grad_accum
    total = gathers * forward + trainable_local * dtypes.reduce * grad_reductions(training, parallel)
    return forward / total if total else 0.0


def dp_overlap(training: TrainingConfig, parallel: ParallelConfig) -> float:
    """Share of the data-parallel traffic the framework hides behind compute: none for
    Megatron-LM 2021-22 (it all-reduced after the backward pass) and for DeepSpeed ZeRO-1/2
    without overlap_comm (stage_1_and_2 reduces its buckets on the compute stream,
    get_accelerator().current_stream(), unless overlap_comm gives them a reduction stream);
    DP_OVERLAP elsewhere (DDP's bucketed all-reduce, FSDP's and ZeRO-3's prefetching, Megatron-Core's
    overlap_grad_reduce / overlap_param_gather)."""
    if training.kernel_stack in DP_OVERLAP_BY_STACK:
        return DP_OVERLAP_BY_STACK[training.kernel_stack]
    if parallel.sharding in ("zero1", "zero2") and not parallel.zero.overlaps(int(parallel.sharding[-1])):
        return 0.0
    return DP_OVERLAP


def exposed_dp_seconds(dp_seconds: float, replicate_seconds: float, forward_share: float,
                       compute_seconds: float, overlap: float) -> float:
    """Data-parallel traffic not hidden: the forward all-gathers behind overlap x the forward
    (a third of the compute), the rest behind overlap x the backward (two thirds); what hides
    still slows the compute (with_contention)."""
    forward = dp_seconds * forward_share
    backward = dp_seconds - forward + replicate_seconds
    exposed = (max(0.0, forward - overlap * compute_seconds / 3)
               + max(0.0, backward - overlap * compute_seconds * 2 / 3))
    return with_contention(dp_seconds + replicate_seconds, exposed)


def with_contention(seconds: float, exposed: float) -> float:
    """``exposed`` seconds of a transfer of ``seconds``, plus what its hidden rest slows the
    compute it overlaps (OVERLAP_SLOWDOWN per hidden second)."""
    return exposed + OVERLAP_SLOWDOWN * max(0.0, seconds - exposed)


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
        return CommDtypes(2, reduce if parallel.sharding in FSDP_SHARDING else 4, 2)
    param = 2.0
    if training.float8_all_gather:
        param = gathered_linear_share * 1 + (1 - gathered_linear_share) * 2
    return CommDtypes(param, reduce, 2)


def comm_seconds(comm: dict[str, float], parallel: ParallelConfig, link: Interconnect,
                 latency: dict[str, float] | None = None) -> dict[str, float]:
    """Seconds of each kind of communication per step: its bytes at the group's bandwidth, plus
    the latency of the collectives it launches when given (latency_seconds). Ranks are laid out
    TP innermost, then CP, then the data-parallel shard group, its replicas and PP (torchtitan's
    mesh order): a group spans nodes when its ranks and the ranks inside them do not fit in one
    node."""
    rates = _link_rates(parallel, link)
    out = {k: (volume / rates[k] if volume else 0.0) for k, volume in comm.items()}
    for kind, seconds in (latency or {}).items():
        out[kind] = out.get(kind, 0.0) + seconds
    return out


def latency_seconds(calls: dict, parallel: ParallelConfig, link: Interconnect) -> dict[str, float]:
    """NCCL's latency per step of each kind's collectives (collective_calls x
    collective_latency over the kind's group on this link)."""
    return dict(_latency_seconds(tuple(calls.items()), parallel, link))


@lru_cache(maxsize=8192)
def _latency_seconds(calls: tuple, parallel: ParallelConfig, link: Interconnect) -> tuple:
    latencies = _call_latencies(parallel, link)
    return tuple((kind, sum(n * latencies[kind][coll] for coll, n in launched)) for kind, launched in calls)


@lru_cache(maxsize=8192)
def _call_latencies(parallel: ParallelConfig, link: Interconnect) -> dict[str, dict[str, float]]:
    """Seconds of one collective of each sort per kind's group (collective_latency), per layout
    and link."""
    return {k: {c: collective_latency(c, size, per_node, link) for c in ("gather", "allreduce", "p2p")}
            for k, (size, _span, per_node) in _groups(parallel, link).items()}


def _groups(parallel: ParallelConfig, link: Interconnect) -> dict[str, tuple[int, bool, int]]:
    """kind: (ranks of the group, whether they span nodes, members of the group in one node)."""
    g = link.gpus_per_node
    tp, dp, pp, ep, cp = parallel.tp, parallel.dp, parallel.pp, parallel.ep, parallel.cp
    ranks = dp * (cp if parallel.sharding in FSDP_SHARDING else 1)
    shard = min(ranks, parallel.hybrid_shard_size) if parallel.sharding == "fsdp-hybrid" else ranks
    inner = tp * (1 if parallel.sharding in FSDP_SHARDING else cp)  # ranks inside one data-parallel rank
    groups = {
        "dp": (shard, inner * shard > g, g // inner),
        "dp_replicate": (ranks // shard, inner * ranks > g, g // (inner * shard)),
        "tp": (tp, tp > g, g),
        "cp": (cp, tp * cp > g, g // tp),
        # a stage hop leaves through the sending GPU's own share; some hop crosses nodes as soon
        # as the job does
        "pp": (pp, parallel.world_size > g, 1),
        "ep": (ep, tp * ep > g, 1),  # all-to-all: each rank's own traffic leaves through its share
    }
    return {k: (size, span, max(1, min(size, per_node))) for k, (size, span, per_node) in groups.items()}


@lru_cache(maxsize=8192)
def _link_rates(parallel: ParallelConfig, link: Interconnect) -> dict[str, float]:
    """Bytes per second per GPU of each kind's collective (comm_seconds), per layout and link."""
    out = {}
    for k, (size, span, per_node) in _groups(parallel, link).items():
        try:
            out[k] = link_gbps(size, span, link, per_node) * 1e9
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
    ("Introducing Async Tensor Parallelism in PyTorch", 2024). What hides slows the matmuls
    (with_contention)."""
    if not parallel.async_tp or not tp_seconds:
        return tp_seconds
    forward = tp_seconds / 2
    first = forward / parallel.tp
    return with_contention(tp_seconds, tp_seconds - forward + first
                           + max(0.0, forward - first - compute_seconds / 3))


def optimizer_impl(training: TrainingConfig, parallel: ParallelConfig) -> str:
    """How the (CPU) optimizer step runs: the training's choice, or the frameworks' default, a
    fused step: DeepSpeed offloads to its vectorised CPUAdam; Hugging Face's Trainer defaults to
    adamw_torch_fused with torch >= 2.8 (training_args.py), torchtitan to implementation "fused"
    (components/optimizer), torchtune's offload recipes to AdamW(fused=True). A hand-written
    torch.optim.AdamW(params) steps CPU tensors with the single-tensor loop: "single-tensor"."""
    if training.optimizer_impl != "default":
        return training.optimizer_impl
    return "fused"


def host_step_seconds(elems: float, elem_bytes: float, impl: str, ranks_per_node: int, threads: int,
                      host) -> float:
    """Seconds of one rank's optimizer step on the host CPU: the slower of its memory traffic
    (ADAM_PASSES element passes at the bandwidth its threads stream, each core's own at most, the
    node's shared by its ranks) and its arithmetic (threads x SIMD lanes x clock /
    ADAM_CYCLES_PER_VECTOR). threads: the rank's OpenMP threads (launchers give one each), at
    most the node's cores shared by its ranks."""
    ranks = max(1, ranks_per_node)
    threads = max(1, min(threads, host.cpu_cores // ranks))
    bandwidth = min(threads * host.core_bandwidth_gbps, host.memory_bandwidth_gbps / ranks) * 1e9
    arithmetic = threads * host.simd_fp32_lanes * host.clock_ghz * 1e9 / ADAM_CYCLES_PER_VECTOR
    return max(elems * ADAM_PASSES[impl] * elem_bytes / bandwidth, elems / arithmetic)


def offload_seconds(parallel: ParallelConfig, shard_elems: float, gathered_elems: float, microbatches: int,
                    pcie_gbps: float, ranks_per_node: int, compute_seconds: float, *, host,
                    impl: str = "fused", elem_bytes: float = 4.0) -> float:
    """Exposed seconds per step of CPU offload (0 without offload).

    optimizer: the fp32 gradient partition goes to the host during backward (hidden behind it
    as ZeRO-Offload overlaps them), the host steps it (host_step_seconds: DeepSpeed's CPUAdam,
    torch's AdamW for FSDP, each rank on its own threads, the node's memory bandwidth shared), and
    the updated half weights come back. optimizer+params: also the weight shards come up for
    every all-gather (forward and backward of each micro-batch) and the gradient shards go down,
    behind the compute where prefetching lets them."""
    if parallel.offload == "none":
        return 0.0
    link = pcie_gbps * PCIE_EFFICIENCY * 1e9
    threads = parallel.host_threads_per_rank
    step = host_step_seconds(shard_elems, elem_bytes, impl, ranks_per_node, threads, host)
    down = shard_elems * 4 / link
    up = shard_elems * 2 / link
    backward = compute_seconds * 2 / 3
    exposed = step + up + max(0.0, down - backward)
    if parallel.offload == "optimizer+params":
        moved = (2 * gathered_elems * 4 + shard_elems * 4) * microbatches / link
        exposed += max(0.0, moved - DP_OVERLAP * compute_seconds)
    return exposed
