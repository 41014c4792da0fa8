"""Bytes saved for backward, derived op by op from the Hugging Face implementations.

Each function returns bytes for ONE micro-batch on ONE GPU. Symbols: T = b*s tokens,
h hidden, I MLP width, n heads, A = bytes of a compute-dtype activation (4 fp32, 2 half),
R = bytes of the residual stream (fp32 unless the model itself is half precision).

What each op saves (verified with torch.autograd.graph.saved_tensors_hooks, see
tests/sizing/test_activations_measured.py):
- RMSNorm (HF): its fp32 input (or fp32 upcast of a half input), rsqrt (4 B/token), the
  normalised tensor (fp32 with an fp32 model or autocast, half with a half model).
- LayerNorm: its input and two fp32 statistics per token.
- Linear: its input (the weight is a parameter). Under autocast every consumer casts the
  fp32 input to half on its own, so q/k/v each save a half copy.
- SDPA / FlashAttention: q, k, v (k/v with the kv heads only), output and an fp32
  log-sum-exp per head and token. Eager: q, k and v repeated to all heads, the fp32 softmax
  (plus its half copy when computing in half) and the head-merged output.
- SwiGLU: gate, silu(gate), up, and the product. GPT-2 gelu_new: pow's input, tanh's output,
  1 + tanh, 0.5 * x (and c_proj's input); CUDA autocast runs pow in fp32 (its fp32 cast
  list, which CPU autocast lacks), and type promotion keeps the polynomial branch in fp32.
- GPT-2's training forward fills a DynamicCache (``use_cache`` defaults to true; HF turns it
  off for checkpointed layers): k and v are concatenated copies, while q, a view of c_attn's
  output, keeps all three alive wherever the kernel saves q itself (SDPA; eager at b = 1).
- Dropout (p > 0, CUDA): a 1-byte mask per element (and the dropped probabilities).
- Loss: the fp32 log-softmax output over the vocabulary (BERT keeps the logits dtype).
- Frozen weights (LoRA, QLoRA): autograd saves an input of an op only when the gradient that
  needs it is computed (PyTorch's generated autograd code guards each saved input with
  ``should_compute_output``: ``mm`` saves its input for the weight's gradient, ``mul`` each
  factor for the other's). A frozen linear saves nothing, a frozen norm weight keeps no
  normalised copy; bitsandbytes' 4-bit matmul keeps its packed weight only
  (``ctx.tensors = (None, B)``), torchao's NF4 linear too. Only the inputs of adapted linears
  (and each adapter's rank-r middle) are saved (``adapted_linears``; dense llama family).

The Trainyard smoke model (ModelSpec.implementation "trainyard-smoke", the Llama of
provisioning/acceptance/node/train_smoke.py) saves more than HF's Llama, op for op: its RMSNorm
calls ``x.float()`` twice (two fp32 copies of a half input), it repeats k and v to every head
before SDPA, its rotary output is heads-major so the attention output is copied to merge the
heads, it casts its fp32 rotary tables per call, and its loops keep the model's logits until
the optimizer step.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from . import memory as mem
from .config import ParallelConfig, TrainingConfig
from .models import FUSED_MODULES, ModelSpec, param_tensors

LSE_BYTES = 4  # FlashAttention log-sum-exp, fp32 per head and token
STATS_BYTES = 8  # LayerNorm mean + rstd, fp32 per token
INDEX_BYTES = 8  # int64 token ids / labels
DROPOUT_MASK_BYTES = 1  # CUDA native_dropout keeps a bool mask


@dataclass(frozen=True)
class Dt:
    """Dtype facts of one training setup."""

    act: int  # compute activations
    residual: int  # residual stream
    norm_out: int  # what a norm saves for its weight multiply / what feeds the next linear
    autocast: bool  # linear inputs are cast per consumer
    half_model: bool

    @property
    def param(self) -> int:
        """Bytes of an element in the model's own dtype (its weights, the adapters'; fp32 under
        autocast)."""
        return 2 if self.half_model else 4


DT_FP32 = Dt(4, 4, 4, False, False)
DT_AUTOCAST = Dt(2, 4, 4, True, False)
DT_HALF = Dt(2, 2, 2, False, True)


def dtype_facts(training: TrainingConfig, layout: str) -> Dt:
    if training.precision == "fp32":
        return DT_FP32
    if training.precision in ("bf16-mixed", "fp16-mixed") and layout == "autocast":
        return DT_AUTOCAST
    return DT_HALF


def _lin_in(dt: Dt, consumers: int) -> int:
    """Bytes per element saved as the input of `consumers` linears reading one tensor."""
    return 2 * consumers if dt.autocast else dt.norm_out


LLAMA_LINEARS = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")
FUSED_LINEARS = ("qkv_proj", "o_proj", "gate_up_proj", "down_proj")  # Phi-3 (fused_projections)
# The linears that read the attention norm's output, and those that read the MLP norm's
QKV_LINEARS = frozenset({"qkv_proj", *FUSED_MODULES["qkv_proj"]})
GATE_UP_LINEARS = frozenset({"gate_up_proj", *FUSED_MODULES["gate_up_proj"]})


def adapted_linears(m: ModelSpec, tc: TrainingConfig) -> frozenset[str] | None:
    """The layer linears whose weights train while the base is frozen (LoRA/QLoRA on a dense
    llama-family model), or None when autograd sees trainable base weights (full fine-tuning)
    or a model whose frozen ops this module does not trace (GPT-2, BERT, MoE: counted as if
    trained, an over-estimate)."""
    if tc.finetune == "full" or m.family != "llama" or m.is_moe:
        return None
    return _llama_adapted(tc.lora_targets, m.fused_projections)


@lru_cache(maxsize=64)
def _llama_adapted(targets: tuple[str, ...], fused: bool = False) -> frozenset[str]:
    linears = FUSED_LINEARS if fused else LLAMA_LINEARS
    if "all-linear" in targets:
        return frozenset(linears)
    return frozenset(n for n in linears if any(x == n or x.endswith("." + n) for x in targets))


def _adapted_lin_in(dt: Dt, adapted: int, lora_dropout: float = 0.0) -> int:
    """Bytes per element of a tensor read by `adapted` LoRA-adapted linears (and frozen ones):
    lora_A saves it (under autocast its own half cast, one per adapter); frozen ones save nothing.
    With LoRA dropout each adapter drops its own copy (PEFT: ``lora_A(lora_dropout(x))``): lora_A
    saves that copy (its half cast under autocast) and dropout its 1-byte mask, x itself none."""
    if not adapted:
        return 0
    if lora_dropout > 0:
        return adapted * _dropped_copy(dt)
    return 2 * adapted if dt.autocast else dt.norm_out


def untraced_lora_dropout(m: ModelSpec, tc: TrainingConfig, dt: Dt, T: int) -> int:
    """GPT-2, BERT and MoE models keep the full fine-tuning count under LoRA (adapted_linears);
    with LoRA dropout each adapted dense linear's dropped copy and mask come on top, so the count
    stays an over-estimate (experts' adapters, per routed token, are not added)."""
    if tc.finetune == "full" or tc.lora_dropout == 0 or adapted_linears(m, tc) is not None:
        return 0
    targets = tc.lora_targets
    ins = sum(t.shape[1] for t in param_tensors(m)
              if t.kind == "linear" and t.group == "layer" and not t.expert
              and ("all-linear" in targets or any(t.name == x or t.name.endswith("." + x) for x in targets)))
    return _dropped_copy(dt) * T * ins


def _dropped_copy(dt: Dt) -> int:
    """Bytes per element one adapter's dropout keeps: the copy lora_A saves and CUDA's mask."""
    return (2 if dt.autocast else dt.act) + DROPOUT_MASK_BYTES


def _attention_core(m: ModelSpec, tc: TrainingConfig, dt: Dt, b: int, s: int, p: float) -> dict:
    """Saved bytes inside attention after the QKV projections (all heads, no TP split)."""
    T, n = b * s, m.num_heads
    if tc.attention in ("sdpa", "flash"):
        if m.family == "llama":
            qkvo = dt.act * T * (2 * m.q_dim + 2 * m.kv_dim)
            qkvo += smoke_repeated_kv(m, dt, T) + smoke_head_merge_copy(m, dt, T)
        else:
            qkvo = 4 * dt.act * T * m.hidden_size
        return {"qkvo": qkvo + LSE_BYTES * b * n * s, "scores": 0}
    # eager: q, k and v (repeated to all heads), merged output for the out-projection
    qkvo = 4 * dt.act * T * m.q_dim
    if m.family == "llama" and m.num_kv_heads == 1 and b == 1:
        # one kv head at micro-batch 1: repeat_kv's expand-reshape and matmul's folding of the
        # (batch, heads) dims stay stride-0 views, so v (and k, unless autocast casts the fp32
        # rotated k to half: a dense copy) is kept once, not per head
        qkvo -= (1 if dt.autocast else 2) * dt.act * T * (m.q_dim - m.kv_dim)
    if m.family == "llama" or dt.autocast:
        probs = 4 + (2 if dt.act == 2 else 0)  # fp32 softmax (+ its half copy)
    else:
        probs = dt.act  # GPT-2 / BERT softmax in the model dtype
    if m.softcap_scores:  # Gemma 2: tanh keeps its output (the divide and multiply by the cap nothing)
        probs += dt.act
    if p > 0:
        probs += DROPOUT_MASK_BYTES + dt.act
    return {"qkvo": qkvo, "scores": probs * b * n * s * s}


def rms_norm(m: ModelSpec, dt: Dt, T: int, *, trained: bool, fused: bool) -> int:
    """An RMSNorm over T tokens: its fp32 input (or the fp32 upcast of a half input) and rsqrt,
    and the normalised copy that its weight's gradient needs (kept only while the weight trains).
    Gemma's (unit_offset_norm) multiplies in fp32 by ``1 + weight.float()`` and casts after, so
    that copy is fp32 at any model dtype, and the multiply keeps the fp32 ``1 + weight`` for its
    input's gradient. Compiled (fused): its input and rsqrt only."""
    h = m.hidden_size
    if fused:
        return (dt.residual * h + 4) * T
    normalised = (4 if m.unit_offset_norm else dt.norm_out) * h if trained else 0
    unit_offset = 4 * h if m.unit_offset_norm else 0
    return (4 * h + 4 + normalised) * T + unit_offset + smoke_norm_upcast(m, dt, T)


def sliding_window_masks(m: ModelSpec, tc: TrainingConfig, dt: Dt, b: int, s: int) -> tuple[int, int]:
    """(masks, repeated k and v): what the sliding-window layers (Mistral, Phi-3, Gemma 3 …) keep
    beyond a causal layer, all of them together, under SDPA once the sequence reaches the window
    (transformers' masking_utils then builds a mask; below it, is_causal). torch's SDPA turns the
    boolean mask into one in q's dtype on every call, which the kernel keeps for backward
    (b x s x s; every tensor-parallel rank holds it whole, its heads share it), and transformers
    repeats k and v to every head when a mask is given (sdpa_attention.use_gqa_in_sdpa), so those
    copies are kept in place of k and v (split with the heads). With one kv head, repeat_kv's
    expand-reshape stays a view (at any micro-batch): nothing more, but for autocast's half cast
    of the fp32 rotated k. FlashAttention-2 takes the window itself, and eager adds the mask to
    scores it keeps anyway: nothing more."""
    if not m.sliding_layers or tc.attention != "sdpa" or s < m.sliding_window:
        return 0, 0
    copies = (1 if dt.autocast else 0) if m.num_kv_heads == 1 else 2
    repeated = copies * dt.act * b * s * (m.q_dim - m.kv_dim)
    return m.sliding_layers * dt.act * b * s * s, m.sliding_layers * repeated


def rope_tables(m: ModelSpec) -> int:
    """Gemma 3 keeps a cos/sin pair per layer type (local and global rotary bases) where it has both;
    Gemma 2's layers share one (shared_rope)."""
    return 2 if 0 < m.sliding_layers < m.num_layers and not m.shared_rope else 1


def smoke_norm_upcast(m: ModelSpec, dt: Dt, T: int) -> int:
    """The smoke model's RMSNorm, ``x.float() * rsqrt(x.float().pow(2).mean(...))``: on a half
    input each ``x.float()`` is a new fp32 copy, the multiply saves one and pow the other
    (HF upcasts once). On an fp32 input both are x itself."""
    if m.implementation != "trainyard-smoke" or dt.residual == 4:
        return 0
    return 4 * T * m.hidden_size


def smoke_repeated_kv(m: ModelSpec, dt: Dt, T: int) -> int:
    """The smoke model repeats k and v to every head (``repeat_interleave``) before SDPA, which
    saves them so: all heads instead of the kv heads (HF passes enable_gqa)."""
    if m.implementation != "trainyard-smoke":
        return 0
    return 2 * dt.act * T * (m.q_dim - m.kv_dim)


def smoke_head_merge_copy(m: ModelSpec, dt: Dt, T: int) -> int:
    """The smoke model's rotary (``torch.stack(...).flatten``) makes q heads-major (b, n, s, d);
    SDPA's output follows q's layout (flash: ``empty_like(q)``; cuDNN: q's stride order), so
    ``out.transpose(1, 2).reshape(b, s, -1)`` copies it and wo saves that copy next to the
    output SDPA saves. HF's q stays (b, s, n, d) and the merge is a view."""
    if m.implementation != "trainyard-smoke":
        return 0
    return dt.act * T * m.q_dim


def smoke_rope_casts(m: ModelSpec, tc: TrainingConfig, dt: Dt, s: int) -> int:
    """Per layer: the smoke model slices its fp32 rotary tables and casts them to the
    activation dtype in every call (q and k: cos and sin, s x head_dim/2 each), and the rotary
    multiplies save the casts. Under FSDP2 the block's MixedPrecisionPolicy casts its float
    inputs, the tables among them, once per block (cast_forward_inputs): two casts. In fp32
    they save the tables themselves (smoke_rope_tables)."""
    if m.implementation != "trainyard-smoke" or dt.act == 4:
        return 0
    casts = 2 if tc.mixed_layout == "fsdp2" else 4
    return casts * s * (m.head_dim // 2) * dt.act


def smoke_rope_tables(m: ModelSpec, tc: TrainingConfig, dt: Dt, s: int) -> int:
    """The smoke model's fp32 cos and sin tables (s x head_dim/2 each), saved once: by the
    rotary multiplies in fp32, and as an input of every checkpointed block."""
    if m.implementation != "trainyard-smoke" or (dt.act != 4 and tc.checkpointing != "full"):
        return 0
    return 2 * s * (m.head_dim // 2) * 4


def held_logits(m: ModelSpec, dt: Dt, b: int, s: int, tp: int) -> int:
    """The smoke model's loops keep the model's output logits (``logits = model(...)``)
    until the optimizer step returns: through the loss backward and the step. HF's output
    object is dropped once its loss is taken (Trainer, ``model(...).loss``)."""
    if m.implementation != "trainyard-smoke":
        return 0
    return dt.act * b * s * m.vocab_size // tp


def gelu_new_bytes(dt: Dt) -> int:
    """Bytes per MLP element GPT-2's gelu_new (Python ops) and c_proj save: pow's input,
    tanh's output, 1 + tanh, 0.5 * x and c_proj's input. CUDA autocast runs pow in fp32 (an
    fp32 copy of its input), and type promotion carries fp32 through tanh; 0.5 * x stays
    half, and c_proj casts the fp32 product to half."""
    poly = 4 if dt.autocast else dt.act
    return 3 * poly + 2 * dt.act


def gpt2_cache_copies(m: ModelSpec, tc: TrainingConfig, dt: Dt, b: int, s: int) -> int:
    """GPT-2's training forward fills a DynamicCache: k and v are ``torch.cat`` copies that
    attention saves, while q, a view of c_attn's (b, s, 3h) output, keeps all of it alive.
    SDPA/flash save q itself; eager's batched matmul copies q unless b = 1. HF turns the cache
    off in checkpointed layers."""
    if tc.checkpointing == "full" or (tc.attention == "eager" and b > 1):
        return 0
    return 2 * dt.act * b * s * m.hidden_size


def layer_terms(m: ModelSpec, tc: TrainingConfig, dt: Dt, b: int, s: int) -> dict[str, int]:
    """One transformer layer, split into 'replicated' (split by TP only with SP),
    'sharded' (split by TP) and 'scores' (the s^2 attention terms, dropped by selective
    recompute)."""
    T, h, inter = b * s, m.hidden_size, m.intermediate_size
    p = tc.dropout_for(m)
    core = _attention_core(m, tc, dt, b, s, p)
    unsplit = 0
    if m.family == "llama":
        fused = tc.compile and not dt.autocast
        adapted = adapted_linears(m, tc)
        norm = rms_norm(m, dt, T, trained=adapted is None, fused=fused)
        if adapted is None:  # under autocast each linear casts the norm's output on its own
            inputs = 2 * _lin_in(dt, 1) if m.fused_projections else _lin_in(dt, 3) + _lin_in(dt, 2)
        else:
            pd = tc.lora_dropout
            inputs = (_adapted_lin_in(dt, len(adapted & QKV_LINEARS), pd)
                      + _adapted_lin_in(dt, len(adapted & GATE_UP_LINEARS), pd))
            if tc.attention == "eager" and not _merged_output_kept(adapted, pd):
                core["qkvo"] -= dt.act * T * m.q_dim  # the head-merged output: no linear keeps it
            if "o_proj" in adapted and pd > 0:
                core["qkvo"] += _dropped_copy(dt) * T * m.q_dim
            elif "o_proj" in adapted and o_proj_input_copied(m, tc, dt):
                core["qkvo"] += 2 * T * m.q_dim
        # Gemma 3 norms the attention's and the MLP's outputs too: two more norms a layer
        norms = 4 if m.post_norms else 2
        replicated = norms * norm + inputs * T * h + smoke_rope_casts(m, tc, dt, s)
        core["qkvo"] += qk_norms(m, dt, T, trained=adapted is None, fused=fused)
        masks, repeated = sliding_window_masks(m, tc, dt, b, s)  # spread evenly over the layers
        core["qkvo"] += repeated // m.num_layers
        unsplit = masks // m.num_layers
        core["qkvo"] += phi3_head_merge_copy(m, tc, dt, T, adapted)
        kept_rep, kept_shard = bnb_kept_inputs(m, tc, dt, T, adapted)
        replicated += kept_rep
        core["qkvo"] += kept_shard
        if adapted is not None:  # each adapter's lora_A output, saved by lora_B
            replicated += len(adapted) * tc.lora_rank * dt.act * T
        core["qkvo"] += dora_saved(m, tc, dt, T)
        mlp = _llama_mlp(m, tc, dt, T, adapted, fused)
    elif m.family == "gpt2":
        ln = (dt.residual * h + STATS_BYTES) * T
        replicated = 2 * ln + 2 * _lin_in(dt, 1) * T * h
        # gelu_new in python ops (gelu_new_bytes); a fused gelu saves its input only
        mlp = (gelu_new_bytes(dt) if m.activation in ("", "gelu_new") else 2 * dt.act) * T * inter
        core["qkvo"] += gpt2_cache_copies(m, tc, dt, b, s)
        if p > 0:
            replicated += 2 * DROPOUT_MASK_BYTES * T * h
    else:  # bert (post-LN)
        ln_in = dt.param
        replicated = (_lin_in(dt, 3) + _lin_in(dt, 1)) * T * h
        replicated += 2 * (ln_in * h + STATS_BYTES) * T
        mlp = 2 * dt.act * T * inter
        if p > 0:
            replicated += 2 * DROPOUT_MASK_BYTES * T * h
    replicated += untraced_lora_dropout(m, tc, dt, T)
    return {"replicated": replicated, "sharded": core["qkvo"] + mlp, "scores": core["scores"],
            "unsplit": unsplit}


def phi3_head_merge_copy(m: ModelSpec, tc: TrainingConfig, dt: Dt, T: int,
                         adapted: frozenset[str] | None) -> int:
    """Phi-3's rotary ends in ``torch.cat([rotated, passed], -1)`` (its partial-rotary code path,
    taken at every rotary width), which leaves q heads-major; the fused kernel's output follows
    q's layout (smoke_head_merge_copy), so merging the heads copies it, and o_proj keeps that
    copy while its weight trains (or its adapter keeps its input). Eager already counts the
    merged output. Tied to fused_projections: Phi-3 is the model type that has both."""
    if not m.fused_projections or tc.attention not in ("sdpa", "flash"):
        return 0
    if adapted is not None and not _merged_output_kept(adapted, tc.lora_dropout):
        return 0
    return dt.act * T * m.q_dim


def qk_norms(m: ModelSpec, dt: Dt, T: int, *, trained: bool, fused: bool) -> int:
    """Qwen3's RMSNorm over each head of q and k (TP-sharded with the heads), HF's RMSNorm op by
    op: the projection's output upcast to fp32 (the output itself when fp32), rsqrt per head and
    token, and the normalised copy in the projection's dtype that the weight's gradient needs
    (not kept when the norm is frozen); compiled: its input and rsqrt. What follows is unchanged:
    RoPE keeps only its tables, the kernel its own q and k."""
    return sum(qk_norm_parts(m, dt, T, trained=trained, fused=fused))


def qk_norm_parts(m: ModelSpec, dt: Dt, T: int, *, trained: bool, fused: bool) -> tuple[int, int]:
    """qk_norms' (q_norm, k_norm) bytes."""
    if not m.qk_norm:
        return 0, 0

    def part(heads: int) -> int:
        elems, rows = T * heads * m.head_dim, T * heads
        if fused:
            return dt.act * elems + 4 * rows
        if m.unit_offset_norm:  # Gemma 3: rms_norm's unit-offset rule over each head
            return 4 * elems + 4 * rows + (4 * elems if trained else 0) + 4 * m.head_dim
        return 4 * elems + 4 * rows + (dt.act * elems if trained else 0)

    return part(m.num_heads), part(m.num_kv_heads)


def _llama_mlp(m: ModelSpec, tc: TrainingConfig, dt: Dt, T: int, adapted: frozenset[str] | None,
               fused: bool) -> int:
    """A llama layer's MLP (TP-sharded): routed experts with their routing state, or SwiGLU's
    gate, silu(gate), up and product (compiled: silu is recomputed in backward)."""
    h, inter = m.hidden_size, m.intermediate_size
    if m.is_moe:
        k, e = m.experts_per_token, m.num_experts
        routing = (4 * e + 8 * k + 4 + 4 * k + 3 * 8 * k + 4 * k) * T
        if dt.autocast:
            routing += 2 * T * h  # router input cast
        return dt.act * T * k * (2 * h + 4 * inter) + routing
    saved = 3 if fused else 4  # the product is down_proj's input: not kept for a frozen one
    if adapted is not None and ("down_proj" not in adapted or tc.lora_dropout > 0):
        saved -= 1
    mlp = saved * dt.act * T * inter
    if adapted is not None and "down_proj" in adapted and tc.lora_dropout > 0:
        mlp += _dropped_copy(dt) * T * inter
    return mlp


def bnb_kept_inputs(m: ModelSpec, tc: TrainingConfig, dt: Dt, T: int,
                    adapted: frozenset[str] | None) -> tuple[int, int]:
    """(replicated, TP-sharded) bytes per layer that bitsandbytes <= 0.43.1 keeps on top of what
    a frozen base saves: its MatMul4Bit.forward stored ``ctx.tensors = (A, B)`` whenever an input
    needs a gradient, so every 4-bit linear kept its input A (bitsandbytes#1270 dropped A in
    0.43.2). q/k/v share the attention norm's output and gate/up the MLP norm's: one copy each,
    unless an adapter without dropout already keeps it; o_proj's input is the fused attention's
    output, which the kernel saves anyway (eager: the merged heads, unless o_proj's adapter keeps
    them); down_proj's is the SwiGLU product, unless its adapter without dropout keeps it."""
    if tc.finetune != "qlora" or tc.bnb_version != "<=0.43.1" or tc.quant_storage == "torchao-nf4" \
            or adapted is None:
        return 0, 0
    def kept_by_adapter(names: set[str]) -> bool:
        return tc.lora_dropout == 0 and bool(adapted & names)

    h, rep, shard = m.hidden_size, 0, 0
    for names in (QKV_LINEARS, GATE_UP_LINEARS):
        if not kept_by_adapter(names):
            rep += dt.act * T * h
    if tc.attention == "eager" and not _merged_output_kept(adapted, tc.lora_dropout):
        shard += dt.act * T * m.q_dim
    if not kept_by_adapter({"down_proj"}):
        shard += dt.act * T * m.intermediate_size
    return rep, shard


def bnb_dequantised(m: ModelSpec, tc: TrainingConfig, tp: int) -> tuple[int, int]:
    """(a layer's, the head's) bytes of a bitsandbytes 4-bit weight dequantised for its matmul:
    MatMul4Bit runs ``linear(A, dequantize_4bit(B, state).to(A.dtype).t())`` in forward and the
    same product for A's gradient in backward, so the largest 4-bit linear's whole weight exists
    for a moment (split by TP). dequantize_4bit writes the dtype the weight was quantised from:
    under transformers the weights as loaded, taken to be the compute dtype (one copy; the stacks
    load in it); under Lightning fp16, then cast to the compute dtype, bf16 or fp32 (two
    copies). The head counts only where it is 4-bit (memory.nf4_linears). torchao's NF4Tensor
    (not bitsandbytes) is not counted here."""
    if tc.finetune != "qlora" or tc.quant_storage == "torchao-nf4":
        return 0, 0
    compute = 4 if tc.precision == "fp32" else 2
    per = compute if tc.nf4_quantizer == "transformers" else 2 + compute
    linears = mem.nf4_linears(tc)
    tensors = [t for t in param_tensors(m) if mem.is_nf4(t, linears)]
    layer = max((t.numel for t in tensors if t.group == "layer"), default=0)
    head = max((t.numel for t in tensors if t.group == "head"), default=0)
    return per * layer // tp, per * head // tp


def bnb_kept_head_input(m: ModelSpec, tc: TrainingConfig, dt: Dt, b: int, s: int) -> int:
    """A 4-bit head (Lightning) on bitsandbytes <= 0.43.1 keeps its input, the final norm's output,
    as every 4-bit linear did (bnb_kept_inputs), unless the head's adapter without dropout already
    keeps that tensor (head_adapter); a half frozen head keeps none."""
    if tc.bnb_version != "<=0.43.1" or "head" not in mem.nf4_linears(tc):
        return 0
    if tc.adapts_head and tc.lora_dropout == 0:
        return 0
    return dt.act * b * s * m.hidden_size


def head_adapter(m: ModelSpec, tc: TrainingConfig, dt: Dt, T: int) -> int:
    """What LoRA on the output head saves (TrainingConfig.adapts_head): lora_A keeps the head's
    input, the final norm's output (with LoRA dropout its dropped copy and mask instead), lora_B
    the rank-r middle; the scaling and the sum with the base output keep nothing. A frozen head
    of the traced llama family keeps no input, so all of it comes on top; GPT-2, BERT and MoE
    models already count the head's input as if trained, so only the dropped copy and the middle
    do. Its logits-sized temporaries: logits_backward_transient."""
    if not tc.adapts_head:
        return 0
    middle = tc.lora_rank * dt.act * T
    if adapted_linears(m, tc) is None:
        return middle + (_dropped_copy(dt) * T * m.hidden_size if tc.lora_dropout > 0 else 0)
    return middle + _adapted_lin_in(dt, 1, tc.lora_dropout) * T * m.hidden_size


def frozen_prefix(m: ModelSpec, tc: TrainingConfig, dt: Dt, b: int, s: int, t: int, sp: bool) -> int:
    """Bytes layer_terms counts for the first layer that it does not save when the base is
    frozen: the frozen embedding's output needs no gradient, so no op saves anything until the
    first adapted linear (its input norm always; attention too when q, k and v are frozen,
    and the second norm when o_proj is frozen as well). Not under full recompute, which keeps
    layer inputs only."""
    adapted = adapted_linears(m, tc)
    if adapted is None or tc.checkpointing in ("full", "selective-op"):
        return 0
    T, h = b * s, m.hidden_size
    fused = tc.compile and not dt.autocast
    norm = rms_norm(m, dt, T, trained=False, fused=fused)
    norm = norm // t if sp else norm
    # LoRA dropout of a first adapter whose input needs no gradient keeps no mask
    masks = DROPOUT_MASK_BYTES * T if tc.lora_dropout > 0 else 0
    # a q/k norm keeps something only where its projection's output needs a gradient (adapted)
    q_norm, k_norm = qk_norm_parts(m, dt, T, trained=False, fused=fused)
    if qkv := len(adapted & QKV_LINEARS):
        frozen_norms = q_norm * ("q_proj" not in adapted) + k_norm * ("k_proj" not in adapted)
        eager = first_eager_attention_unsaved(m, tc, dt, b, s, adapted)
        return norm + masks * qkv * h + (frozen_norms + eager) // t
    core = _attention_core(m, tc, dt, b, s, tc.dropout_for(m))
    unsaved = core["qkvo"] + q_norm + k_norm + (core["scores"] if tc.checkpointing == "none" else 0)
    sdpa_mask = 0  # the first layer slides where any does (hf_config refuses other layouts)
    if m.sliding_layers:
        sdpa_masks, repeated = sliding_window_masks(m, tc, dt, b, s)
        unsaved += repeated // m.sliding_layers
        sdpa_mask = sdpa_masks // m.sliding_layers  # whole on every tensor-parallel rank
    if tc.attention == "eager" and not _merged_output_kept(adapted, tc.lora_dropout):
        unsaved -= dt.act * T * m.q_dim  # layer_terms already leaves the merged output out
    if "o_proj" in adapted:  # o_proj's adapter input (or its dropped copy) needs a gradient
        # its input is the kernel's output, kept; Phi-3's is a copy of it, counted apart
        copied = phi3_head_merge_copy(m, tc, dt, T, adapted) or o_proj_input_copied(m, tc, dt)
        kept = 0 if tc.lora_dropout > 0 or copied else dt.act * T * m.q_dim
        return norm + (unsaved - kept) // t + masks * m.q_dim + sdpa_mask
    # the attention's output norm (Gemma 3) reads an output no adapter made: it keeps nothing either
    post_attention = norm if m.post_norms else 0
    unsaved += first_mlp_unsaved(m, tc, dt, T, adapted, fused)
    return (2 * norm + post_attention + unsaved // t + masks * h * len(adapted & GATE_UP_LINEARS)
            + sdpa_mask)


def first_eager_attention_unsaved(m: ModelSpec, tc: TrainingConfig, dt: Dt, b: int, s: int,
                                  adapted: frozenset[str]) -> int:
    """What _attention_core counts for eager attention in the first layer that it does not save
    when only some of q, k and v need a gradient there (their projections adapted). Each matmul
    keeps a factor only for the other's gradient: q for k's, repeated k for q's; the scores need
    one when q's or k's does, and then softmax keeps its fp32 output, tanh its own (soft-capped
    scores) and the second matmul the repeated v; that matmul keeps the half probabilities (in
    fp32 the softmax output itself) for v's gradient. Under attention dropout: not told apart."""
    if tc.attention != "eager" or m.family != "llama" or tc.dropout_for(m) > 0 or m.fused_projections:
        return 0
    q, k, v = ("q_proj" in adapted), ("k_proj" in adapted), ("v_proj" in adapted)
    T, scores = b * s, b * m.num_heads * s * s
    views = m.num_kv_heads == 1 and b == 1  # repeat_kv's expand-reshape stays a view (_attention_core)
    repeated_k = dt.act * T * (m.kv_dim if views and not dt.autocast else m.q_dim)
    repeated_v = dt.act * T * (m.kv_dim if views else m.q_dim)
    unsaved = (0 if k else dt.act * T * m.q_dim) + (0 if q else repeated_k)
    if not (q or k):
        unsaved += repeated_v
    if tc.checkpointing == "none":  # selective recompute keeps no scores in any layer
        if not (q or k):  # in fp32 the softmax output is the probabilities v's gradient needs
            unsaved += (4 if dt.act == 2 else 0) * scores + (dt.act * scores if m.softcap_scores else 0)
        if dt.act == 2 and not v:
            unsaved += 2 * scores
    return unsaved


@lru_cache(maxsize=64)
def _dora_linears(m: ModelSpec, adapted: frozenset[str]) -> tuple[tuple[int, int], ...]:
    return tuple((t.shape[0], t.shape[1]) for t in param_tensors(m)
                 if t.group == "layer" and t.name in adapted)


def dora_linears(m: ModelSpec, tc: TrainingConfig) -> tuple[tuple[int, int], ...]:
    """(output, input) features of each linear of a layer DoRA adapts; none without use_dora."""
    adapted = adapted_linears(m, tc) if tc.use_dora else None
    return _dora_linears(m, adapted) if adapted else ()


def dora_saved(m: ModelSpec, tc: TrainingConfig, dt: Dt, T: int) -> int:
    """PEFT's DoRA (use_dora), per layer: result + (mag / norm - 1) * base + mag / norm * lora * s
    (tuners/lora/dora.py), so each adapted linear keeps its base output and its adapter's (lora_B's)
    for the magnitude's gradient, in every layer, the first too (the magnitude always trains), and
    three vectors of its width in the magnitude's dtype (the norm, mag / norm and mag / norm - 1;
    the last not where the linear's input needs no gradient, left out: a vector)."""
    outs = sum(d_out for d_out, _ in dora_linears(m, tc))
    return (2 * dt.act * T + 3 * dt.param) * outs


def dora_weight_transient(m: ModelSpec, tc: TrainingConfig, dt: Dt, tp: int) -> int:
    """DoRA works out its weight norm, ||W + s * BA|| per output feature, at every call: for the
    widest adapted linear the identity it runs through the adapter (in x in, the adapters' dtype),
    BA, and s * BA and W + s * BA in the input's dtype exist for a moment (dora.py get_lora_weight,
    get_weight_norm; in the recomputed layer's backward under full recompute)."""
    # the identity and the weight sums in the adapter's dtype (PEFT casts the input to it)
    return max((dt.param * d_in ** 2 + (dt.act + 2 * dt.param) * d_out * d_in // tp
                for d_out, d_in in dora_linears(m, tc)), default=0)


@lru_cache(maxsize=8192)  # on the estimate's hot path: per setup, as _activations
def frozen_weight_casts(m: ModelSpec, tc: TrainingConfig, pc: ParallelConfig, layout: str,
                        shard_weights: bool) -> int:
    """Bytes of the half casts of weights a LoRA plan keeps under autocast (fp32 weights, half
    compute). Autocast caches the casts of leaf tensors that require a gradient only (the
    adapters': kept for the step, like a full fine-tune's whole cache); a frozen weight is cast at
    every call, and its matmul keeps the cast for its input's gradient wherever that input needs
    one: every layer's frozen linears but those of the first layer that read no gradient
    (first_layer_without_gradient), and the head. DoRA with LoRA dropout computes each adapted
    linear's base output again from the dropped input (dora.py): a second cast of its weight.
    Routed experts cast none (transformers 5.24's grouped_mm casts the input to the weight's
    dtype). Each micro-batch in flight on a pipeline stage keeps its own; under full recompute the
    checkpointed layers keep none in forward and the recomputed one's come back in its backward
    (counted, as one layer's). QLoRA's 4-bit linears keep their packed codes (bitsandbytes), not a
    cast; sharded weights are gathered in the compute dtype (no cast)."""
    if layout != "autocast" or tc.finetune != "lora" or shard_weights:
        return 0
    per_layer = _cast_per_layer(m, tc)
    layers = -(-m.num_layers // pc.pp)
    kept = layers - -(-layers // tc.checkpoint_every) if tc.checkpointing == "full" else layers
    in_flight = min(pc.pp, pc.pp_microbatches or tc.grad_accum) if pc.pp > 1 else 1
    without = first_layer_without_gradient(m, tc) if kept == layers else frozenset()
    first_layer = sum(n for name, n in per_layer.items()
                      if name.split(".")[0] in without and not name.endswith(".lora_B"))
    layer = sum(per_layer.values())
    recomputed = layer if tc.checkpointing == "full" else 0
    first_stage = in_flight * (kept * layer - first_layer) + recomputed
    head = m.vocab_size * m.hidden_size + sum(x.total for x in mem.trainable_tensors(m, tc)
                                              if x.group == "head")
    last_stage = kept * layer + recomputed + head
    elems = first_stage + head if pc.pp == 1 else max(first_stage, last_stage)
    return int(2 * elems / pc.tp)


def _cast_per_layer(m: ModelSpec, tc: TrainingConfig) -> dict[str, int]:
    """Elements of one layer's weights a cast of which its matmuls keep under autocast LoRA, by
    name: the frozen linears and router, the adapters (cached), DoRA's second base cast."""
    per_layer = {x.name: x.total // m.num_layers for x in param_tensors(m)
                 if x.group == "layer" and x.kind in ("linear", "router") and not x.expert}
    per_layer.update({x.name: x.total // m.num_layers for x in mem.trainable_tensors(m, tc)
                      if x.group == "layer" and x.kind == "linear" and not x.expert})
    if tc.use_dora and tc.lora_dropout > 0:
        adapted = adapted_linears(m, tc) or frozenset()
        per_layer.update({name + ".dora_base": n for name, n in list(per_layer.items()) if name in adapted})
    return per_layer


def first_layer_without_gradient(m: ModelSpec, tc: TrainingConfig) -> frozenset[str]:
    """The first layer's linears whose input needs no gradient (nothing before the first adapter
    does), so their matmuls keep no cast of their weights, nor their adapters' lora_A: q, k and v
    always (they read the frozen embedding's norm), o_proj unless q, k or v is adapted there, the
    MLP's inputs unless the attention's output needs one. Dense llama family only (none
    otherwise: an over-estimate)."""
    adapted = adapted_linears(m, tc)
    if adapted is None:
        return frozenset()
    attention = bool(adapted & QKV_LINEARS)
    mlp = attention or "o_proj" in adapted
    down = mlp or bool(adapted & GATE_UP_LINEARS)
    without = {"q_proj", "k_proj", "v_proj", "qkv_proj"}
    without |= set() if attention else {"o_proj"}
    without |= set() if mlp else {"gate_proj", "up_proj", "gate_up_proj"}
    without |= set() if down else {"down_proj"}
    return frozenset(without)


def o_proj_input_copied(m: ModelSpec, tc: TrainingConfig, dt: Dt) -> bool:
    """Under autocast PEFT casts the fused kernel's half output to its fp32 adapter
    (``_cast_input_dtype``) and autocast casts that back to half: o_proj's lora_A keeps a copy of
    its own, not the output the kernel keeps. (Eager's merged output and Phi-3's merge copy are
    kept by nothing else: the copy takes their place.)"""
    return dt.autocast and tc.attention != "eager" and not m.fused_projections and tc.lora_dropout == 0


def first_mlp_unsaved(m: ModelSpec, tc: TrainingConfig, dt: Dt, T: int, adapted: frozenset[str],
                      fused: bool) -> int:
    """What _llama_mlp counts for the first layer's MLP that it does not save when its input needs
    no gradient (no attention linear adapted there): SiLU keeps gate only for gate's adapter, and
    the product keeps each factor only for the other's gradient (silu(gate) for up's, up for
    gate's), so of gate, silu(gate) and up it keeps 2 with gate adapted and 1 more with up; a
    product that needs no gradient (neither adapted) leaves down_proj's adapter dropout no mask.
    Routed experts and a compiled MLP: not told apart."""
    if m.is_moe or fused:
        return 0
    gate = bool(adapted & {"gate_proj", "gate_up_proj"})
    up = bool(adapted & {"up_proj", "gate_up_proj"})
    unsaved = (3 - 2 * gate - up) * dt.act * T * m.intermediate_size
    if "down_proj" in adapted and tc.lora_dropout > 0 and not (gate or up):
        unsaved += DROPOUT_MASK_BYTES * T * m.intermediate_size
    return unsaved


def _merged_output_kept(adapted: frozenset[str], lora_dropout: float) -> bool:
    """Eager attention's head-merged output is o_proj's input: kept only by its adapter's lora_A
    (without dropout; with it, lora_A keeps the dropped copy)."""
    return "o_proj" in adapted and lora_dropout == 0


def checkpointed_layer_input(m: ModelSpec, tc: TrainingConfig, dt: Dt, b: int, s: int) -> int:
    """Full recompute keeps only each layer's input."""
    if m.family == "bert":
        return dt.param * b * s * m.hidden_size
    return dt.residual * b * s * m.hidden_size


def outside_layers(m: ModelSpec, tc: TrainingConfig, dt: Dt, b: int, s: int) -> int:
    """Embedding inputs, final norm and head input (never checkpointed by HF)."""
    T, h = b * s, m.hidden_size
    p = tc.dropout_for(m)
    ids = INDEX_BYTES * T
    if m.family == "llama":
        # cos and sin, saved by the rotary multiply (inside the layers: gone with full recompute)
        rope = 0 if tc.checkpointing == "full" else 2 * s * m.head_dim * dt.param
        rope *= rope_tables(m)
        if m.implementation == "trainyard-smoke":  # its tables are buffers, cast per layer
            rope = smoke_rope_tables(m, tc, dt, s)
        if adapted_linears(m, tc) is not None:  # frozen embedding, final norm and head
            return rope + rms_norm(m, dt, T, trained=False, fused=False)
        return ids + rope + rms_norm(m, dt, T, trained=True, fused=False) + _lin_in(dt, 1) * T * h
    if m.family == "gpt2":
        emb = ids + INDEX_BYTES * s + (DROPOUT_MASK_BYTES * T * h if p > 0 else 0)
        if tc.attention == "eager" and tc.checkpointing == "full":
            emb += dt.residual * b * s * s  # the causal mask, expanded to the batch, input of every block
        return emb + (dt.residual * h + STATS_BYTES) * T + _lin_in(dt, 1) * T * h
    ln_in = dt.param
    emb = 2 * ids + INDEX_BYTES * m.max_position_embeddings + (ln_in * h + STATS_BYTES) * T
    if p > 0:
        emb += DROPOUT_MASK_BYTES * T * h
    head = (_lin_in(dt, 1) + dt.act + (4 if dt.autocast else dt.act) + _lin_in(dt, 1)) * T * h
    return emb + head + STATS_BYTES * T


def op_sac_layer(m: ModelSpec, dt: Dt, b: int, s: int) -> tuple[int, int]:
    """torchtitan op-level SAC on a llama layer: (replicated, TP-sharded) bytes kept.

    Its policy saves the outputs of every other aten.mm of a layer (wq, wv, w1, w2 of
    wq, wk, wv, wo, w1, w3, w2) and of the fused attention (output + fp32 log-sum-exp), plus
    the layer input; everything else is recomputed in backward."""
    T = b * s
    replicated = dt.residual * T * m.hidden_size + dt.act * T * m.hidden_size  # input, w2 out
    sharded = dt.act * T * (2 * m.q_dim + m.kv_dim + m.intermediate_size) + LSE_BYTES * b * m.num_heads * s
    return replicated, sharded


def op_sac_recompute_matmul_params(m: ModelSpec) -> int:
    """Matmul weights per layer whose forward op SAC runs again (wk, wo, w3)."""
    h = m.hidden_size
    return h * m.kv_dim + m.q_dim * h + h * m.intermediate_size


def logits_and_loss(m: ModelSpec, dt: Dt, b: int, s: int, tp: int, loss: str = "full",
                    compiled: bool = False) -> int:
    """Vocabulary-sized tensors saved by the loss + the int64 targets.

    full / chunked: the fp32 log-softmax output (chunked keeps every chunk's); fused linear
    cross-entropy keeps an fp32 log-sum-exp per token only. Soft-capped logits (Gemma 2) add the
    output tanh keeps, in the logits' dtype, but under a fused loss (it caps inside its chunks)."""
    T = b * s
    if loss == "fused":
        return 4 * T + INDEX_BYTES * T
    capped = dt.act * T * m.vocab_size // tp if m.softcap_logits else 0
    if compiled:  # the fused kernel recomputes softmax from the half logits and the lse
        return dt.act * T * m.vocab_size // tp + (4 + INDEX_BYTES) * T + capped
    per = 2 if (m.family == "bert" and dt.half_model) else 4
    return per * T * m.vocab_size // tp + INDEX_BYTES * T + capped


def fused_loss_chunk_tokens(m: ModelSpec, tokens: int) -> int:
    """Liger's fused linear cross-entropy chunk: next_power_of_2(ceil(T / ceil(V / h)))."""
    chunks = -(-m.vocab_size // m.hidden_size)
    return min(tokens, 1 << max(0, (-(-tokens // chunks) - 1).bit_length()))


def logits_backward_transient(m: ModelSpec, b: int, s: int, tp: int, loss: str = "full",
                              chunks: int = 8, compiled: bool = False, head_adapter: bool = False,
                              act: int = 2) -> int:
    """Around the loss: full: fp32 grad of the log-softmax output and of the logits (8 B per
    logit) at the start of backward. chunked: the bf16 logits plus one chunk's fp32 copy in
    forward, or one chunk's two fp32 grads in backward. fused: one chunk of fp32 logits and
    their grad. compiled: the logits' gradient one fused kernel writes (``act`` bytes each), or,
    larger, an adapted head's forward (``head_adapter``): lora_B's output and its scaled copy next
    to the base output, per output chunk (every other loss's own transient is at least as large)."""
    elems = b * s * m.vocab_size // tp
    if compiled and loss != "fused":
        per = (2 if head_adapter else 1) * act
        return per * elems // (chunks if loss == "chunked" else 1)
    if loss == "chunked":
        return max(2 * elems + 4 * elems // chunks, 8 * elems // chunks)
    if loss == "fused":
        return 8 * fused_loss_chunk_tokens(m, b * s) * m.vocab_size // tp
    return 8 * elems


def activation_bytes(
    m: ModelSpec, tc: TrainingConfig, pc: ParallelConfig, dt: Dt, layers_per_stage: int
) -> tuple[int, int, int]:
    """(saved activations on the busiest pipeline stage, one recomputed layer for backward,
    bytes moved to host RAM by activation offloading)."""
    b, s, t = tc.micro_batch, tc.seq_len, pc.tp
    terms = layer_terms(m, tc, dt, b, s)
    replicated = terms["replicated"] // t if pc.sp else terms["replicated"]
    full_layer = replicated + (terms["sharded"] + terms["scores"]) // t + terms["unsplit"]
    ckpt_input = checkpointed_layer_input(m, tc, dt, b, s) // (t if pc.sp else 1)
    if tc.checkpointing == "full":
        kept = -(-layers_per_stage // tc.checkpoint_every)  # layers checkpointed
        layers = kept * ckpt_input + (layers_per_stage - kept) * full_layer
        per_layer, recompute = ckpt_input, full_layer
    elif tc.checkpointing == "selective-op":
        rep, shard = op_sac_layer(m, dt, b, s)
        per_layer = (rep // t if pc.sp else rep) + shard // t
        layers, recompute = per_layer * layers_per_stage, full_layer
    elif tc.checkpointing == "selective":
        per_layer, recompute = full_layer - terms["scores"] // t, terms["scores"] // t
        layers = per_layer * layers_per_stage
    else:
        per_layer, recompute = full_layer, 0
        layers = per_layer * layers_per_stage
    # 1F1B (and ZB-H1, which keeps 1F1B's peak): the first stage holds min(pp, microbatches)
    # micro-batches in flight. Interleaved with v virtual stages it warms up further ahead:
    # L (1 + (p-1)/(p v)) layers' worth instead of L (Korthikanti et al. 2022, 4.2.3).
    in_flight = min(pc.pp, pc.pp_microbatches or tc.grad_accum) if pc.pp > 1 else 1
    layers -= frozen_prefix(m, tc, dt, b, s, t, pc.sp)
    layers *= in_flight
    if pc.pp > 1 and pc.pp_interleave > 1:
        layers = int(layers * (1 + (pc.pp - 1) / (pc.pp * pc.pp_interleave)))
    offloaded = 0
    if tc.activation_offload:  # the layer being computed stays on the GPU
        offloaded = max(0, layers - max(per_layer, ckpt_input))
    saved = layers - offloaded + outside_layers(m, tc, dt, b, s) + head_adapter(m, tc, dt, b * s)
    return saved, recompute, offloaded
