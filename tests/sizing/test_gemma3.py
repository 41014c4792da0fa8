"""Gemma 3 (config.json model_type "gemma3_text"): Gemma's layer (unit-offset RMSNorms, GeGLU) with
per-head q/k norms, norms on the attention's and the MLP's outputs, and sliding-window attention on
every layer but each sliding_window_pattern-th. Its saved activations are measured against
transformers' Gemma3ForCausalLM in tests/sizing/test_activations_measured.py (the sequence passes the
window there) and, under LoRA, in tests/sizing/test_lora_frozen_activations.py."""

from __future__ import annotations

from dataclasses import replace

import pytest

from portal.sizing.estimator import TrainingConfig, estimate, get_preset, model_from_hf_config
from portal.sizing.estimator.activations import DT_AUTOCAST, DT_HALF, sliding_window_masks
from portal.sizing.estimator.compute import attention_flops_per_token, attention_layers
from portal.sizing.estimator.models import count_params

GEMMA3_1B = {  # google/gemma-3-1b-pt config.json (architecture fields)
    "model_type": "gemma3_text", "vocab_size": 262144, "hidden_size": 1152, "intermediate_size": 6912,
    "num_hidden_layers": 26, "num_attention_heads": 4, "num_key_value_heads": 1, "head_dim": 256,
    "max_position_embeddings": 32768, "sliding_window": 512, "sliding_window_pattern": 6,
    "attn_logit_softcapping": None, "final_logit_softcapping": None}
GEMMA3_4B_TEXT = {  # the text_config of google/gemma-3-4b-it: only what differs from Gemma3TextConfig
    "model_type": "gemma3_text", "hidden_size": 2560, "intermediate_size": 10240, "num_hidden_layers": 34,
    "sliding_window": 1024}


def test_a_gemma3_config_slides_on_five_layers_of_six_with_q_k_and_post_norms():
    spec = model_from_hf_config(GEMMA3_1B, name="google/gemma-3-1b-pt")
    assert (spec.model_type, spec.qk_norm, spec.unit_offset_norm, spec.post_norms) == \
        ("gemma3_text", True, True, True)
    assert (spec.sliding_window, spec.sliding_layers) == (512, 22)  # layers 6, 12, 18 and 24 attend fully
    assert spec.tie_word_embeddings
    assert count_params(spec).total == 999_885_952  # as transformers builds it: the model card's "1B"
    assert count_params(get_preset("gemma-3-1b")).total == 999_885_952
    types = ["sliding_attention"] * 20 + ["full_attention"] * 6
    assert model_from_hf_config({**GEMMA3_1B, "layer_types": types}, name="g").sliding_layers == 20
    every_layer_full = model_from_hf_config({**GEMMA3_1B, "layer_types": ["full_attention"] * 26}, name="g")
    assert (every_layer_full.sliding_window, every_layer_full.sliding_layers) == (0, 0)


def test_a_hub_text_config_takes_gemma3_text_configs_defaults():
    spec = model_from_hf_config(GEMMA3_4B_TEXT, name="google/gemma-3-4b-it (text)")
    assert (spec.num_heads, spec.num_kv_heads, spec.head_dim, spec.vocab_size) == (8, 4, 256, 262208)
    assert (spec.sliding_window, spec.sliding_layers) == (1024, 29)
    assert round(count_params(spec).total / 1e9, 2) == 3.88  # the 4B's language model, no vision tower


@pytest.mark.parametrize("bad, why", [
    ({"attn_logit_softcapping": 50.0}, "with attn_logit_softcapping is not one the estimator sizes"),
    ({"final_logit_softcapping": 30.0}, "with final_logit_softcapping is not one the estimator sizes"),
    ({"use_bidirectional_attention": True}, "use_bidirectional_attention is not one the estimator sizes"),
    ({"layer_types": ["sliding_attention"] * 3}, "layer_types must list sliding_attention or full_attention"),
    ({"sliding_window_pattern": 0}, "sliding_window_pattern must be a whole number >= 1"),
])
def test_what_gemma3_would_compute_otherwise_is_refused(bad, why):
    with pytest.raises(ValueError, match=why):
        model_from_hf_config({**GEMMA3_1B, **bad}, name="g")


def test_sdpa_keeps_a_mask_per_sliding_layer_and_repeated_k_v_once_the_sequence_reaches_the_window():
    """Below the window transformers uses is_causal: nothing more. From it on, SDPA's mask in q's
    dtype per sliding layer, and k and v repeated to every head (views with one kv head, but for
    autocast's half cast of k)."""
    one_kv = get_preset("gemma-3-1b")
    four_kv = model_from_hf_config(GEMMA3_4B_TEXT, name="g")
    sdpa = TrainingConfig(micro_batch=2, seq_len=2048, attention="sdpa")
    mask = 2 * 2 * 2048 * 2048  # b x s x s in half
    assert sliding_window_masks(one_kv, replace(sdpa, seq_len=511), DT_HALF, 2, 511) == (0, 0)
    assert sliding_window_masks(one_kv, sdpa, DT_HALF, 2, 2048) == (22 * mask, 0)
    autocast_k = 2 * 2 * 2048 * (1024 - 256)  # one half copy of k for the heads beyond its one
    assert sliding_window_masks(one_kv, sdpa, DT_AUTOCAST, 2, 2048) == (22 * mask, 22 * autocast_k)
    k_and_v = 2 * 2 * 2 * 2048 * (2048 - 1024)
    assert sliding_window_masks(four_kv, sdpa, DT_HALF, 2, 2048) == (29 * mask, 29 * k_and_v)
    for attention in ("flash", "eager"):
        assert sliding_window_masks(one_kv, replace(sdpa, attention=attention), DT_HALF, 2, 2048) == (0, 0)
    without = replace(one_kv, sliding_window=0, sliding_layers=0)
    est = estimate(one_kv, replace(sdpa, precision="bf16", checkpointing="none")).per_gpu.activations
    plain = estimate(without, replace(sdpa, precision="bf16", checkpointing="none")).per_gpu.activations
    second_rope = 2 * 2048 * 256 * 2  # cos and sin of the local rotary base, beside the global one's
    extra = sum(sliding_window_masks(one_kv, sdpa, DT_HALF, 2, 2048)) + second_rope
    assert est - plain == pytest.approx(extra, abs=26)  # spread over the 26 layers in whole bytes


def test_sliding_layers_attend_within_the_window_under_flash_and_the_whole_square_under_sdpas_mask():
    """FlashAttention-2 skips the blocks outside the window (a query sees at most the window, a causal
    one s / 2 on average); SDPA on a mask computes all s x s blocks, twice a causal layer's."""
    spec = get_preset("gemma-3-1b")
    at = {att: attention_layers(spec, TrainingConfig(seq_len=8192, attention=att))
          for att in ("flash", "sdpa", "eager")}
    assert at["flash"] == 4 + 22 * (2 * 512 * 8192 - 512 * 512) / 8192**2  # w s - w^2/2 keys of s^2/2
    assert at["sdpa"] == 4 + 2 * 22
    assert at["eager"] == 26
    assert attention_layers(spec, TrainingConfig(seq_len=256, attention="sdpa")) == 26  # below the window
    flash = attention_flops_per_token(spec, TrainingConfig(seq_len=8192, attention="flash"))
    causal = attention_flops_per_token(replace(spec, sliding_window=0, sliding_layers=0),
                                       TrainingConfig(seq_len=8192, attention="flash"))
    assert flash == pytest.approx(causal * at["flash"] / 26)
