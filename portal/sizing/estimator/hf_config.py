"""Build a ModelSpec from a Hugging Face ``config.json`` (already parsed into a dict)."""

from __future__ import annotations

import math
from typing import Any

from .models import (
    FUSED_TYPES,
    MODEL_TYPES,
    POST_NORM_TYPES,
    QK_NORM_TYPES,
    SHARED_ROPE_TYPES,
    SOFTCAP_TYPES,
    UNIT_OFFSET_NORM_TYPES,
    ModelSpec,
)

LLAMA_TYPES = tuple(t for t, family in MODEL_TYPES.items() if family == "llama")
# Gemma2Config's and Gemma3TextConfig's shape defaults, for a config.json that leaves a key out (the
# text_config of a hub Gemma 3 states only what differs from them)
SHAPE_DEFAULTS = {
    "gemma2": {"vocab_size": 256_000, "hidden_size": 2304, "intermediate_size": 9216, "num_hidden_layers": 26,
               "num_attention_heads": 8, "num_key_value_heads": 4, "head_dim": 256,
               "max_position_embeddings": 8192},
    "gemma3_text": {"vocab_size": 262_208, "hidden_size": 2304, "intermediate_size": 9216,
                    "num_hidden_layers": 26, "num_attention_heads": 8, "num_key_value_heads": 4,
                    "head_dim": 256, "max_position_embeddings": 131_072},
}
# The types whose layer_types mix sliding and full layers: (their name, their config class's
# sliding_window, and where config.json gives no layer_types, the key that says every how many
# layers one attends fully and its default: Gemma 2 alternates, Gemma 3 reads
# sliding_window_pattern)
LAYER_TYPE_SLIDING = {"gemma2": ("Gemma 2", 4096, None, 2),
                      "gemma3_text": ("Gemma 3", 4096, "sliding_window_pattern", 6)}
# The types whose config class reads soft-caps (other types' code ignores the keys), and its caps where
# config.json leaves a key out (None: no cap): Gemma 2 caps by default; a Gemma 3 cap is refused
SOFTCAP_KEYS = ("attn_logit_softcapping", "final_logit_softcapping")
SOFTCAP_DEFAULTS = {"gemma2": (50.0, 30.0), "gemma3_text": (None, None)}
# The model types whose layers transformers gives a sliding window, and its config class's
# sliding_window where config.json leaves the key out (Qwen's apply only with use_sliding_window)
SLIDING_DEFAULTS = {"mistral": 4096, "mixtral": None, "phi3": None, "qwen2": 4096, "qwen3": 4096,
                    "qwen3_moe": 4096}
OPT_IN_SLIDING_TYPES = ("qwen2", "qwen3", "qwen3_moe")
NOT_SIZED = {
    "gemma3": "this is Gemma 3 with its vision tower (SigLIP) and projector; to size text-only"
              " training, upload its text_config as the config.json (model_type gemma3_text)",
}


def _need(cfg: dict[str, Any], *keys: str) -> Any:
    for key in keys:
        if cfg.get(key) is not None:
            return cfg[key]
    raise ValueError(f"config.json has no {' / '.join(keys)}")


def model_from_hf_config(cfg: dict[str, Any], name: str = "") -> ModelSpec:
    """Llama/Mistral/Qwen2/Qwen3/Phi-3/Gemma/Gemma 2/Gemma 3 (incl. grouped-query attention), Mixtral and
    Qwen3-MoE, GPT-2 and BERT; the spec keeps config.json's ``model_type`` (what the stacks read for
    the architecture). Types the estimator knows it does not size are refused with the reason."""
    if not isinstance(cfg, dict):
        raise ValueError("config must be a JSON object (the contents of config.json)")
    model_type = cfg.get("model_type")
    name = str(name or cfg.get("_name_or_path") or model_type)
    build = _BUILDERS.get(model_type) if isinstance(model_type, str) else None
    if model_type in NOT_SIZED:
        raise ValueError(f"model_type {model_type!r} is not one the estimator sizes: {NOT_SIZED[model_type]}")
    if build is None:
        raise ValueError(
            f"unsupported model_type {model_type!r}; supported: {', '.join(LLAMA_TYPES)}, gpt2, bert"
        )
    return build(cfg, name, model_type)


def _llama(cfg: dict[str, Any], name: str, model_type: str) -> ModelSpec:
    if model_type in SHAPE_DEFAULTS:
        cfg = {**cfg, **{k: v for k, v in SHAPE_DEFAULTS[model_type].items() if cfg.get(k) is None}}
    qk_norm = model_type in QK_NORM_TYPES
    gemma = model_type in UNIT_OFFSET_NORM_TYPES
    shape = _hf_shape(cfg, name, "llama", model_type)
    experts, routed = 0, 0
    if model_type == "mixtral":
        experts, routed = cfg.get("num_local_experts", 0), cfg.get("num_experts_per_tok", 0)
    elif model_type == "qwen3_moe":  # every layer routed, to experts of their own width
        if cfg.get("mlp_only_layers") or (cfg.get("decoder_sparse_step") or 1) != 1:
            raise ValueError("a Qwen3-MoE config with dense MLP layers among the routed ones "
                             "(mlp_only_layers, decoder_sparse_step > 1) is not one the estimator sizes: "
                             "every layer must be routed")
        # the hub's config.json says num_experts; transformers 5 writes num_local_experts
        experts, routed = _need(cfg, "num_experts", "num_local_experts"), _need(cfg, "num_experts_per_tok")
        shape["intermediate_size"] = _need(cfg, "moe_intermediate_size")
    elif model_type == "phi3" and any(cfg.get(k) for k in ("resid_pdrop", "embd_pdrop")):
        raise ValueError("a Phi-3 config with residual or embedding dropout (resid_pdrop, embd_pdrop > 0) is"
                         " not one the estimator sizes: its dropout masks are not counted")
    if cfg.get("use_bidirectional_attention"):
        raise ValueError(f"a {model_type} config with use_bidirectional_attention is not one the estimator"
                         " sizes: it is an encoder, not the causal model trained here")
    layers = shape["num_layers"]
    layers = int(layers) if isinstance(layers, float) and layers.is_integer() else layers
    # a count of another type: ModelSpec refuses it in words
    counted = isinstance(layers, int) and not isinstance(layers, bool)
    window, sliding = _sliding_window(cfg, model_type, layers) if counted else (0, 0)
    return ModelSpec(
        **shape,
        num_kv_heads=cfg.get("num_key_value_heads") or 0,
        # GemmaConfig's defaults where its config.json leaves them out: head_dim 256, a tied head
        head_dim=cfg.get("head_dim") or (256 if gemma else 0),
        max_position_embeddings=cfg.get("max_position_embeddings") or 0,
        tie_word_embeddings=bool(cfg.get("tie_word_embeddings", gemma)),
        # Qwen2 always has q/k/v biases; Llama, Qwen3, Qwen3-MoE and the Gemmas have them only with
        # attention_bias, and then on o_proj too.
        qkv_bias=model_type == "qwen2" or bool(cfg.get("attention_bias", False)),
        o_bias=(model_type == "llama" or qk_norm or gemma) and bool(cfg.get("attention_bias", False)),
        mlp_bias=model_type == "llama" and bool(cfg.get("mlp_bias", False)),
        qk_norm=qk_norm,
        fused_projections=model_type in FUSED_TYPES,
        unit_offset_norm=gemma,
        post_norms=model_type in POST_NORM_TYPES,
        shared_rope=model_type in SHARED_ROPE_TYPES,
        **_softcaps(cfg, model_type),
        sliding_window=window,
        sliding_layers=sliding,
        num_experts=experts,
        experts_per_token=routed,
        dropout=float(cfg.get("attention_dropout", 0.0) or 0.0),
    )


def _sliding_window(cfg: dict[str, Any], model_type: str, layers: int) -> tuple[int, int]:
    """(sliding_window, how many layers attend within it) as transformers 5.24 reads config.json.
    Mistral (4096 where the key is absent), Mixtral, Phi-3 and Qwen3-MoE (with use_sliding_window)
    slide on every layer once a window is set; Qwen2 and Qwen3 (with use_sliding_window) on the
    layers from max_window_layers on; Gemma 3 on every layer but each sliding_window_pattern-th
    and Gemma 2 and 3 on the layers their layer_types name (_layer_type_sliding). The layers the
    estimator counts start with a sliding one where any slides (activations.frozen_prefix reads the
    first layer so): a Qwen whose first layers attend fully and slide after is refused."""
    if model_type in LAYER_TYPE_SLIDING:
        return _layer_type_sliding(cfg, layers, model_type)
    if model_type not in SLIDING_DEFAULTS or (model_type in OPT_IN_SLIDING_TYPES
                                               and not cfg.get("use_sliding_window")):
        return 0, 0
    window = cfg.get("sliding_window", SLIDING_DEFAULTS[model_type])
    if window is None:
        return 0, 0
    if model_type in ("qwen2", "qwen3"):
        first = cfg.get("max_window_layers", 28)
        if isinstance(first, bool) or not isinstance(first, int) or first < 0:
            raise ValueError(f"max_window_layers must be a whole number >= 0, got {first!r}")
        if 0 < first < layers:
            raise ValueError(f"a {model_type} config that attends fully on its first {first} layers and"
                             " within sliding_window after is not one the estimator sizes (use_sliding_window"
                             " with max_window_layers below num_hidden_layers)")
        return (window, layers) if first == 0 else (0, 0)
    return window, layers


def _softcaps(cfg: dict[str, Any], model_type: str) -> dict[str, bool]:
    """Gemma 2's soft-capped attention scores and logits, as Gemma2Config reads config.json (50 and
    30 where a key is absent, none where it is null). Gemma 3 has none: a cap there is refused."""
    if model_type not in SOFTCAP_DEFAULTS:  # its code ignores the keys
        return {"softcap_scores": False, "softcap_logits": False}
    caps = {key: cfg.get(key, default) for key, default in zip(SOFTCAP_KEYS, SOFTCAP_DEFAULTS[model_type],
                                                                strict=True)}
    for key, cap in caps.items():
        if cap is None:
            continue
        if model_type not in SOFTCAP_TYPES:
            raise ValueError(f"a {model_type} config with {key} is not one the estimator sizes: only"
                             f" {', '.join(SOFTCAP_TYPES)} soft-caps its scores or logits here")
        if isinstance(cap, bool) or not isinstance(cap, int | float) or not 0 < cap < math.inf:
            raise ValueError(f"{key} must be a finite number above 0 (or null: no cap), got {cap!r}")
    return {"softcap_scores": caps["attn_logit_softcapping"] is not None,
            "softcap_logits": caps["final_logit_softcapping"] is not None}


def _layer_type_sliding(cfg: dict[str, Any], layers: int, model_type: str) -> tuple[int, int]:
    """Gemma 2's and Gemma 3's window and sliding layers, as their config classes read config.json:
    ``layer_types`` where given, else every layer but each n-th (Gemma 2: every other one; Gemma 3:
    each ``sliding_window_pattern``-th, 6). What they would compute otherwise is refused: no
    window (transformers builds the sliding mask regardless), a first layer that attends fully."""
    model, default_window, pattern_key, default_pattern = LAYER_TYPE_SLIDING[model_type]
    window = cfg.get("sliding_window", default_window)
    if window is None:
        raise ValueError(f"a {model} config needs a sliding_window (transformers builds its sliding"
                         " layers' mask from it)")
    types = cfg.get("layer_types")
    if types is not None:
        if not isinstance(types, list) or len(types) != layers \
                or not all(t in ("sliding_attention", "full_attention") for t in types):
            raise ValueError(f"layer_types must list sliding_attention or full_attention for each of the"
                             f" {layers} layers")
        if types[0] == "full_attention" and "sliding_attention" in types:
            raise ValueError(f"a {model} config whose first layer attends fully is not one the"
                             f" estimator sizes ({model}'s own start with sliding layers)")
        sliding = types.count("sliding_attention")
        return (window, sliding) if sliding else (0, 0)
    pattern = cfg.get(pattern_key, default_pattern) if pattern_key else default_pattern
    if isinstance(pattern, bool) or not isinstance(pattern, int) or pattern < 1:
        raise ValueError(f"sliding_window_pattern must be a whole number >= 1, got {pattern!r}")
    sliding = layers - layers // pattern
    return (window, sliding) if sliding else (0, 0)


def _gpt2(cfg: dict[str, Any], name: str, model_type: str) -> ModelSpec:
    hidden = _need(cfg, "n_embd", "hidden_size")
    return ModelSpec(
        name=name,
        family="gpt2",
        model_type=model_type,
        vocab_size=_need(cfg, "vocab_size"),
        hidden_size=hidden,
        num_layers=_need(cfg, "n_layer", "num_hidden_layers"),
        num_heads=_need(cfg, "n_head", "num_attention_heads"),
        intermediate_size=cfg.get("n_inner") or 4 * hidden,
        max_position_embeddings=_need(cfg, "n_positions", "n_ctx"),
        tie_word_embeddings=bool(cfg.get("tie_word_embeddings", True)),
        dropout=float(cfg.get("resid_pdrop", 0.1)),
        activation=cfg.get("activation_function", "gelu_new"),
    )


def _bert(cfg: dict[str, Any], name: str, model_type: str) -> ModelSpec:
    return ModelSpec(
        **_hf_shape(cfg, name, "bert", model_type),
        max_position_embeddings=cfg.get("max_position_embeddings", 512),
        type_vocab_size=cfg.get("type_vocab_size", 2),
        tie_word_embeddings=bool(cfg.get("tie_word_embeddings", True)),
        dropout=float(cfg.get("hidden_dropout_prob", 0.1)),
    )


def _hf_shape(cfg: dict[str, Any], name: str, family: str, model_type: str) -> dict[str, Any]:
    """The fields Llama-style and BERT configs spell alike (``num_hidden_layers`` …)."""
    return {"name": name, "family": family, "model_type": model_type,
            "vocab_size": _need(cfg, "vocab_size"), "hidden_size": _need(cfg, "hidden_size"),
            "num_layers": _need(cfg, "num_hidden_layers"), "num_heads": _need(cfg, "num_attention_heads"),
            "intermediate_size": _need(cfg, "intermediate_size")}


_BUILDERS = {"gpt2": _gpt2, "bert": _bert, **dict.fromkeys(LLAMA_TYPES, _llama)}
