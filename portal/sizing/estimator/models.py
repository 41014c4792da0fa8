"""ModelSpec: the architecture numbers of a transformer, and exact parameter counting.

Counting follows the Hugging Face implementations tensor by tensor, so that
``model.params.total == sum(p.numel() for p in model.parameters())`` for
``*ForCausalLM`` (llama/mistral/qwen2/qwen3/mixtral/qwen3_moe), ``GPT2LMHeadModel`` and ``BertForMaskedLM``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache

from .hashing import hash_once

# llama = RMSNorm + SwiGLU + RoPE (llama/mistral/qwen2/qwen3/mixtral/qwen3_moe)
FAMILIES = ("llama", "gpt2", "bert")
# The Hugging Face architectures this estimator counts: config.json's ``model_type`` -> the family
# whose tensors it has. The stacks read the model_type (the stack family, the decoder-layer class).
MODEL_TYPES = {"llama": "llama", "mistral": "llama", "qwen2": "llama", "qwen3": "llama", "mixtral": "llama",
               "qwen3_moe": "llama", "phi3": "llama", "gemma": "llama", "gemma2": "llama",
               "gemma3_text": "llama",
               "gpt2": "gpt2", "bert": "bert"}
# A layer with fused_projections (Phi-3): each fused linear and the separate ones it stands for
FUSED_MODULES = {"qkv_proj": ("q_proj", "k_proj", "v_proj"), "gate_up_proj": ("gate_proj", "up_proj")}
# The model types whose layer has per-head q/k norms, those that fuse q/k/v and gate/up, those
# whose RMSNorm scales by 1 + weight in fp32, those that norm the attention's and the MLP's
# outputs too, those whose sliding and full layers rotate with one cos/sin table, and those that
# may soft-cap their attention scores and logits (config.json says whether they do)
QK_NORM_TYPES = ("qwen3", "qwen3_moe", "gemma3_text")
FUSED_TYPES = ("phi3",)
UNIT_OFFSET_NORM_TYPES = ("gemma", "gemma2", "gemma3_text")
POST_NORM_TYPES = ("gemma2", "gemma3_text")
SHARED_ROPE_TYPES = ("gemma2",)
SOFTCAP_TYPES = ("gemma2",)
# The model types transformers 5.24 gives no SDPA path, whatever their config says
# (Gemma2PreTrainedModel._supports_sdpa = False): it runs them eager unless told flash
NO_SDPA_TYPES = ("gemma2",)
# The model_type of a model known only by its family (model_from_params: no config.json).
FAMILY_MODEL_TYPES = {"llama": "llama", "gpt2": "gpt2", "bert": "bert"}
INT_FIELDS = ("vocab_size", "hidden_size", "num_layers", "num_heads", "intermediate_size", "num_kv_heads",
              "head_dim", "max_position_embeddings", "num_experts", "experts_per_token", "type_vocab_size",
              "params_override", "sliding_window", "sliding_layers")
BOOL_FIELDS = ("tie_word_embeddings", "qkv_bias", "o_bias", "mlp_bias", "qk_norm", "fused_projections",
               "unit_offset_norm", "post_norms", "shared_rope", "softcap_scores", "softcap_logits")
# The code that runs the model, for what its ops save for backward (activations.py):
# "hf": the Hugging Face transformers modules; "trainyard-smoke": the Llama of
# provisioning/acceptance/node/train_smoke.py, as its loops (train_smoke.train, the node
# memory probe, bench/stack_gpu.py's worker) train it.
IMPLEMENTATIONS = ("hf", "trainyard-smoke")


@dataclass(frozen=True)
class Tensor:
    """One parameter tensor of the model, ``count`` times (e.g. once per layer)."""

    name: str
    shape: tuple[int, ...]
    count: int
    kind: str  # "linear" (weight of a matmul), "bias", "norm", "embedding", "router"
    group: str  # "embed", "layer", "final", "head"
    expert: bool = False

    @property
    def numel(self) -> int:
        n = 1
        for d in self.shape:
            n *= d
        return n

    @property
    def total(self) -> int:
        return self.numel * self.count


@dataclass(frozen=True)
class ParamCounts:
    total: int
    trainable: int
    active: int  # per token (MoE: only the routed experts)


@hash_once
@dataclass(frozen=True)
class ModelSpec:
    name: str
    family: str
    vocab_size: int
    hidden_size: int
    num_layers: int
    num_heads: int
    intermediate_size: int
    num_kv_heads: int = 0  # 0: same as num_heads
    head_dim: int = 0  # 0: hidden_size // num_heads
    max_position_embeddings: int = 0
    tie_word_embeddings: bool = False
    qkv_bias: bool = False
    o_bias: bool = False
    mlp_bias: bool = False
    qk_norm: bool = False  # an RMSNorm over each head's q and k before RoPE (Qwen3, Qwen3-MoE)
    fused_projections: bool = False  # q/k/v in one qkv_proj, gate/up in one gate_up_proj (Phi-3)
    unit_offset_norm: bool = False  # RMSNorm as (x_normed * (1 + weight)) in fp32, then cast (Gemma)
    post_norms: bool = False  # RMSNorms on the attention's and the MLP's outputs as well (Gemma 2, 3)
    # sliding and full layers share one rotary table (Gemma 2); a model with both kinds of layer
    # otherwise keeps one per kind (Gemma 3's local and global rotary bases)
    shared_rope: bool = False
    softcap_scores: bool = False  # attention scores soft-capped, cap * tanh(scores / cap) (Gemma 2)
    softcap_logits: bool = False  # output logits soft-capped the same way (Gemma 2)
    sliding_window: int = 0  # the keys a sliding-window layer's query sees (0: none; Mistral, Gemma 3)
    sliding_layers: int = 0  # how many of the layers attend within sliding_window
    num_experts: int = 0  # 0: dense MLP
    experts_per_token: int = 0
    type_vocab_size: int = 0  # BERT token types
    dropout: float = 0.0  # hidden/attention dropout probability used in training
    activation: str = ""  # GPT-2: "gelu_new" (python ops, saves 4 tensors) or a fused gelu
    implementation: str = "hf"  # the model code: IMPLEMENTATIONS
    params_override: int = 0  # bare parameter count given by the user (model_from_params)
    source: str = field(default="", compare=False)
    # config.json's model_type (MODEL_TYPES; "": not known). Out of comparison and hash, like
    # source: the numbers depend on the architecture's numbers only, so caches stay shared.
    model_type: str = field(default="", compare=False)

    def __post_init__(self) -> None:
        if self.family not in FAMILIES:
            raise ValueError(f"unknown model family {self.family!r}; use one of {FAMILIES}")
        self._check_types()
        for label, value in (
            ("vocab_size", self.vocab_size),
            ("hidden_size", self.hidden_size),
            ("num_layers", self.num_layers),
            ("num_heads", self.num_heads),
            ("intermediate_size", self.intermediate_size),
        ):
            if value <= 0:
                raise ValueError(f"{label} must be positive, got {value}")
        if self.num_kv_heads == 0:
            object.__setattr__(self, "num_kv_heads", self.num_heads)
        if self.head_dim == 0:
            if self.hidden_size % self.num_heads:
                raise ValueError(
                    f"hidden_size {self.hidden_size} is not divisible by {self.num_heads} heads;"
                    " give head_dim explicitly"
                )
            object.__setattr__(self, "head_dim", self.hidden_size // self.num_heads)
        if self.num_heads % self.num_kv_heads:
            raise ValueError(
                f"{self.num_kv_heads} key/value heads do not divide {self.num_heads} attention heads"
            )
        if self.num_experts and not 0 < self.experts_per_token <= self.num_experts:
            raise ValueError(
                f"experts_per_token must be between 1 and num_experts={self.num_experts}"
            )
        self._check_layer()
        if self.implementation not in IMPLEMENTATIONS:
            raise ValueError(f"implementation {self.implementation!r} is unknown; use one of"
                             f" {', '.join(IMPLEMENTATIONS)}")
        if self.implementation == "trainyard-smoke" and (self.family != "llama" or self.is_moe):
            raise ValueError("the Trainyard smoke model is a dense Llama: implementation='trainyard-smoke'"
                             " needs family='llama' without experts")

    def _check_layer(self) -> None:
        """The layer's flags agree with its model_type and belong to a Hugging Face llama-family
        layer; a sliding window comes with the layers that use it."""
        if self.model_type and MODEL_TYPES.get(self.model_type) != self.family:
            types = ", ".join(t for t, f in MODEL_TYPES.items() if f == self.family)
            raise ValueError(f"model_type {self.model_type!r} is not of the {self.family} family;"
                             f" use one of {types} (or leave it out)")
        if self.model_type and (self.qk_norm != (self.model_type in QK_NORM_TYPES)
                                or self.fused_projections != (self.model_type in FUSED_TYPES)
                                or self.unit_offset_norm != (self.model_type in UNIT_OFFSET_NORM_TYPES)
                                or self.post_norms != (self.model_type in POST_NORM_TYPES)
                                or self.shared_rope != (self.model_type in SHARED_ROPE_TYPES)
                                or (self.softcap_scores or self.softcap_logits)
                                and self.model_type not in SOFTCAP_TYPES):
            raise ValueError(f"model_type {self.model_type!r} and its layer disagree: qk_norm is"
                             f" {', '.join(QK_NORM_TYPES)}'s, fused_projections {', '.join(FUSED_TYPES)}'s,"
                             f" unit_offset_norm {', '.join(UNIT_OFFSET_NORM_TYPES)}'s, post_norms"
                             f" {', '.join(POST_NORM_TYPES)}'s, shared_rope {', '.join(SHARED_ROPE_TYPES)}'s,"
                             f" soft-capping only {', '.join(SOFTCAP_TYPES)}'s")
        if (self.sliding_window > 0) != (self.sliding_layers > 0) or self.sliding_layers > self.num_layers:
            raise ValueError(f"sliding_window {self.sliding_window} and sliding_layers {self.sliding_layers}"
                             f" go together: both 0, or a window and how many of the {self.num_layers}"
                             " layers use it")
        for flag, what in (("qk_norm", "an RMSNorm over each head's q and k, as Qwen3's"),
                           ("unit_offset_norm", "an RMSNorm scaled by 1 + weight in fp32, as Gemma's"),
                           ("post_norms", "norms on the attention's and the MLP's outputs, as Gemma 3's"),
                           ("shared_rope", "one rotary table for sliding and full layers, as Gemma 2's"),
                           ("softcap_scores", "soft-capped attention scores, as Gemma 2's"),
                           ("softcap_logits", "soft-capped logits, as Gemma 2's"),
                           ("sliding_layers", "sliding-window attention layers, as Mistral's")):
            if getattr(self, flag) and (self.family != "llama" or self.implementation != "hf"):
                raise ValueError(f"{flag} ({what}) is a Hugging Face llama-family layer: it needs"
                                 " family='llama' and implementation='hf'")
        if self.fused_projections and (self.family != "llama" or self.implementation != "hf" or self.is_moe):
            raise ValueError("fused_projections (one qkv_proj and one gate_up_proj, as Phi-3's) is a dense"
                             " Hugging Face llama-family layer: family='llama', implementation='hf', no"
                             " experts")

    def _check_types(self) -> None:
        """Shapes are whole numbers (an integral float such as 4096.0 is taken as 4096), flags
        booleans, names strings: a config.json with other values gets a ValueError, not a
        TypeError deep inside the arithmetic."""
        for label in INT_FIELDS:
            value = getattr(self, label)
            if isinstance(value, float) and value.is_integer():
                value = int(value)
                object.__setattr__(self, label, value)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ValueError(f"{label} must be a whole number >= 0, got {value!r}")
        for label in BOOL_FIELDS:
            if not isinstance(getattr(self, label), bool):
                raise ValueError(f"{label} must be true or false, got {getattr(self, label)!r}")
        for label in ("name", "activation", "implementation", "model_type"):
            if not isinstance(getattr(self, label), str):
                raise ValueError(f"{label} must be text, got {getattr(self, label)!r}")
        d = self.dropout
        if isinstance(d, bool) or not isinstance(d, int | float) or not 0 <= d < 1:
            raise ValueError(f"dropout must be a probability in [0, 1), got {d!r}")

    @property
    def is_moe(self) -> bool:
        return self.num_experts > 0

    @property
    def runs_sdpa(self) -> bool:
        """Whether transformers runs this model's attention in SDPA when asked (not Gemma 2's, nor
        soft-capped scores)."""
        return not self.softcap_scores and self.model_type not in NO_SDPA_TYPES

    @property
    def llama_layer(self) -> bool:
        """Llama's own dense layer: seven separate linears and plain RMSNorms (no experts, fused
        projections, q/k norms or Gemma's norms), what torchtitan's llama3 builds."""
        return (self.family == "llama" and not self.is_moe and not self.fused_projections and not self.qk_norm
                and not self.unit_offset_norm)

    @property
    def q_dim(self) -> int:
        return self.num_heads * self.head_dim

    @property
    def kv_dim(self) -> int:
        return self.num_kv_heads * self.head_dim

    @property
    def params(self) -> ParamCounts:
        return count_params(self)


def _linear(name, out_f, in_f, count, group, bias, expert=False, kind="linear"):
    yield Tensor(name, (out_f, in_f), count, kind, group, expert)
    if bias:
        yield Tensor(name + ".bias", (out_f,), count, "bias", group, expert)


def _llama_tensors(m: ModelSpec):
    h, L, inter = m.hidden_size, m.num_layers, m.intermediate_size
    yield Tensor("embed_tokens", (m.vocab_size, h), 1, "embedding", "embed")
    if m.fused_projections:  # FUSED_MODULES
        yield from _linear("qkv_proj", m.q_dim + 2 * m.kv_dim, h, L, "layer", m.qkv_bias)
    else:
        yield from _linear("q_proj", m.q_dim, h, L, "layer", m.qkv_bias)
        yield from _linear("k_proj", m.kv_dim, h, L, "layer", m.qkv_bias)
        yield from _linear("v_proj", m.kv_dim, h, L, "layer", m.qkv_bias)
    yield from _linear("o_proj", h, m.q_dim, L, "layer", m.o_bias)
    if m.qk_norm:
        yield Tensor("q_norm", (m.head_dim,), L, "norm", "layer")
        yield Tensor("k_norm", (m.head_dim,), L, "norm", "layer")
    yield Tensor("input_layernorm", (h,), L, "norm", "layer")
    yield Tensor("post_attention_layernorm", (h,), L, "norm", "layer")
    if m.post_norms:  # Gemma 2, 3: post_attention_layernorm norms the attention's output, these the MLP's
        yield Tensor("pre_feedforward_layernorm", (h,), L, "norm", "layer")
        yield Tensor("post_feedforward_layernorm", (h,), L, "norm", "layer")
    if m.is_moe:
        e = m.num_experts
        yield Tensor("router", (e, h), L, "router", "layer")
        yield Tensor("gate_proj", (inter, h), L * e, "linear", "layer", True)
        yield Tensor("up_proj", (inter, h), L * e, "linear", "layer", True)
        yield Tensor("down_proj", (h, inter), L * e, "linear", "layer", True)
    elif m.fused_projections:
        yield from _linear("gate_up_proj", 2 * inter, h, L, "layer", m.mlp_bias)
        yield from _linear("down_proj", h, inter, L, "layer", m.mlp_bias)
    else:
        yield from _linear("gate_proj", inter, h, L, "layer", m.mlp_bias)
        yield from _linear("up_proj", inter, h, L, "layer", m.mlp_bias)
        yield from _linear("down_proj", h, inter, L, "layer", m.mlp_bias)
    yield Tensor("norm", (h,), 1, "norm", "final")
    if not m.tie_word_embeddings:
        yield Tensor("lm_head", (m.vocab_size, h), 1, "linear", "head")


def _gpt2_tensors(m: ModelSpec):
    h, L, inter = m.hidden_size, m.num_layers, m.intermediate_size
    yield Tensor("wte", (m.vocab_size, h), 1, "embedding", "embed")
    yield Tensor("wpe", (m.max_position_embeddings, h), 1, "embedding", "embed")
    for ln in ("ln_1", "ln_2"):
        yield Tensor(ln, (h,), L, "norm", "layer")
        yield Tensor(ln + ".bias", (h,), L, "norm", "layer")
    yield from _linear("c_attn", 3 * h, h, L, "layer", True)
    yield from _linear("attn.c_proj", h, h, L, "layer", True)
    yield from _linear("c_fc", inter, h, L, "layer", True)
    yield from _linear("mlp.c_proj", h, inter, L, "layer", True)
    yield Tensor("ln_f", (h,), 1, "norm", "final")
    yield Tensor("ln_f.bias", (h,), 1, "norm", "final")
    if not m.tie_word_embeddings:
        yield Tensor("lm_head", (m.vocab_size, h), 1, "linear", "head")


def _bert_tensors(m: ModelSpec):
    h, L, inter = m.hidden_size, m.num_layers, m.intermediate_size
    yield Tensor("word_embeddings", (m.vocab_size, h), 1, "embedding", "embed")
    yield Tensor("position_embeddings", (m.max_position_embeddings, h), 1, "embedding", "embed")
    if m.type_vocab_size:
        yield Tensor("token_type_embeddings", (m.type_vocab_size, h), 1, "embedding", "embed")
    yield Tensor("embeddings.LayerNorm", (2 * h,), 1, "norm", "embed")
    for name in ("query", "key", "value", "attention.output.dense"):
        yield from _linear(name, h, h, L, "layer", True)
    yield from _linear("intermediate.dense", inter, h, L, "layer", True)
    yield from _linear("output.dense", h, inter, L, "layer", True)
    yield Tensor("attention.output.LayerNorm", (2 * h,), L, "norm", "layer")
    yield Tensor("output.LayerNorm", (2 * h,), L, "norm", "layer")
    # BertForMaskedLM head: transform (dense + LayerNorm), decoder tied to word embeddings.
    yield from _linear("cls.transform.dense", h, h, 1, "head", True)
    yield Tensor("cls.transform.LayerNorm", (2 * h,), 1, "norm", "head")
    yield Tensor("cls.decoder.bias", (m.vocab_size,), 1, "bias", "head")
    if not m.tie_word_embeddings:
        yield Tensor("cls.decoder", (m.vocab_size, h), 1, "linear", "head")


@lru_cache(maxsize=512)
def param_tensors(model: ModelSpec) -> tuple[Tensor, ...]:
    """Every parameter tensor of the model (HF layout), with multiplicities."""
    maker = {"llama": _llama_tensors, "gpt2": _gpt2_tensors, "bert": _bert_tensors}[model.family]
    return tuple(maker(model))


@lru_cache(maxsize=512)
def count_params(model: ModelSpec) -> ParamCounts:
    tensors = param_tensors(model)
    total = sum(t.total for t in tensors)
    active = total
    if model.is_moe:
        expert = sum(t.total for t in tensors if t.expert)
        active = total - expert + expert * model.experts_per_token // model.num_experts
    if model.params_override:
        scale = model.params_override / total
        total, active = model.params_override, round(active * scale)
    return ParamCounts(total=total, trainable=total, active=active)


@lru_cache(maxsize=512)
def arch_scale(model: ModelSpec) -> float:
    """params_override / architecture count (1.0 unless the count was given bare)."""
    if not model.params_override:
        return 1.0
    return model.params_override / sum(t.total for t in param_tensors(model))


@lru_cache(maxsize=512)
def layer_params(model: ModelSpec) -> int:
    """Parameters of one transformer layer (all experts included)."""
    n = sum(t.total for t in param_tensors(model) if t.group == "layer") // model.num_layers
    return round(n * arch_scale(model))


def model_from_params(
    params: int,
    layers: int,
    hidden: int,
    heads: int,
    vocab: int,
    *,
    kv_heads: int = 0,
    intermediate: int = 0,
    family: str = "llama",
    tie_word_embeddings: bool = False,
    max_position_embeddings: int = 4096,
    name: str = "custom",
    model_type: str = "",
) -> ModelSpec:
    """A model known by its parameter count and shape.

    The MLP width is solved so that the architecture has ``params`` parameters (unless
    ``intermediate`` is given); the reported parameter count is exactly ``params``.
    ``model_type`` defaults to the family's (FAMILY_MODEL_TYPES).
    """
    if params <= 0:
        raise ValueError(f"params must be positive, got {params}")
    base = ModelSpec(
        name=name, family=family, vocab_size=vocab, hidden_size=hidden, num_layers=layers,
        num_heads=heads, num_kv_heads=kv_heads, intermediate_size=1,
        tie_word_embeddings=tie_word_embeddings, max_position_embeddings=max_position_embeddings,
        model_type=model_type or FAMILY_MODEL_TYPES.get(family, ""),
    )
    if not intermediate:
        fixed = count_params(base).total
        per_unit = (count_params(_with_intermediate(base, 2)).total - fixed)
        intermediate = max(1, round((params - fixed) / per_unit) + 1)
    spec = _with_intermediate(base, intermediate)
    return ModelSpec(**{**_fields(spec), "params_override": int(params)})


def _fields(spec: ModelSpec) -> dict:
    return {k: getattr(spec, k) for k in spec.__dataclass_fields__}


def _with_intermediate(spec: ModelSpec, inter: int) -> ModelSpec:
    return ModelSpec(**{**_fields(spec), "intermediate_size": inter})
