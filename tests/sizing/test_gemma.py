"""Gemma (config.json model_type "gemma"): a llama-family layer (GeGLU where Llama has SwiGLU: the
same saved tensors) whose RMSNorm multiplies in fp32 by 1 + weight and casts after, and a head
tied to the embedding by default. Its saved activations are measured against transformers'
GemmaForCausalLM in tests/sizing/test_activations_measured.py and, under LoRA, in
tests/sizing/test_lora_frozen_activations.py."""

from __future__ import annotations

from dataclasses import replace

import pytest

from portal.sizing.estimator import TrainingConfig, estimate, get_preset, model_from_hf_config
from portal.sizing.estimator.activations import DT_AUTOCAST, DT_HALF, rms_norm
from portal.sizing.estimator.models import ModelSpec, count_params

GEMMA_2B = {  # google/gemma-2b config.json (architecture fields; no tie_word_embeddings: tied)
    "model_type": "gemma", "vocab_size": 256000, "hidden_size": 2048, "intermediate_size": 16384,
    "num_hidden_layers": 18, "num_attention_heads": 8, "num_key_value_heads": 1, "head_dim": 256,
    "max_position_embeddings": 8192, "attention_bias": False, "hidden_act": "gelu"}


def test_a_gemma_config_is_a_tied_llama_layer_with_unit_offset_norms():
    spec = model_from_hf_config(GEMMA_2B, name="google/gemma-2b")
    assert (spec.family, spec.model_type, spec.unit_offset_norm) == ("llama", "gemma", True)
    assert spec.tie_word_embeddings and not (spec.qk_norm or spec.qkv_bias or spec.o_bias)
    assert count_params(spec).total == 2_506_172_416  # the model card's 2.51B
    no_head_dim = {k: v for k, v in GEMMA_2B.items() if k != "head_dim"}
    assert model_from_hf_config(no_head_dim, name="g").head_dim == 256  # GemmaConfig's default
    untied = model_from_hf_config({**GEMMA_2B, "tie_word_embeddings": False}, name="g")
    assert count_params(untied).total - count_params(spec).total == 256000 * 2048
    biased = model_from_hf_config({**GEMMA_2B, "attention_bias": True}, name="g")
    assert biased.qkv_bias and biased.o_bias and not biased.mlp_bias


def test_the_gemma_7b_preset_has_its_published_parameter_count():
    assert count_params(get_preset("gemma-7b")).total == 8_537_680_896  # "8.54B"


def test_a_gemma_norm_keeps_an_fp32_normalised_copy_and_its_one_plus_weight():
    """Llama's RMSNorm multiplies the weight by the normalised copy cast back to a half model's
    dtype (2 B); Gemma's multiplies in fp32 and casts after, so the copy it keeps is 4 B, and the
    fp32 1 + weight (4 B per channel) is kept for the input's gradient, trained or frozen."""
    gemma = get_preset("gemma-7b")
    llama = replace(gemma, model_type="llama", unit_offset_norm=False)
    T, h = 4096, gemma.hidden_size
    assert rms_norm(gemma, DT_HALF, T, trained=True, fused=False) \
        - rms_norm(llama, DT_HALF, T, trained=True, fused=False) == 2 * h * T + 4 * h
    assert rms_norm(gemma, DT_HALF, T, trained=False, fused=False) \
        - rms_norm(llama, DT_HALF, T, trained=False, fused=False) == 4 * h
    # fp32 weights (autocast keeps the norms in fp32): the copy is fp32 for both
    assert rms_norm(gemma, DT_AUTOCAST, T, trained=True, fused=False) \
        - rms_norm(llama, DT_AUTOCAST, T, trained=True, fused=False) == 4 * h
    training = TrainingConfig(precision="bf16", micro_batch=1, seq_len=4096, checkpointing="none")
    more = estimate(gemma, training).per_gpu.activations - estimate(llama, training).per_gpu.activations
    assert more == (2 * gemma.num_layers + 1) * (2 * h * T + 4 * h)  # two norms a layer and the final one


def test_unit_offset_norm_is_gemmas_and_a_hugging_face_llama_layers_only():
    with pytest.raises(ValueError, match="model_type 'llama' and its layer disagree"):
        replace(get_preset("gemma-2b"), model_type="llama")
    with pytest.raises(ValueError, match="model_type 'gemma' and its layer disagree"):
        replace(get_preset("gemma-2b"), unit_offset_norm=False)
    with pytest.raises(ValueError, match="unit_offset_norm .* needs family='llama' and implementation='hf'"):
        ModelSpec(name="g", family="gpt2", vocab_size=100, hidden_size=64, num_layers=2, num_heads=2,
                  intermediate_size=256, max_position_embeddings=64, unit_offset_norm=True)
    with pytest.raises(ValueError, match="unit_offset_norm must be true or false"):
        ModelSpec(name="g", family="llama", vocab_size=100, hidden_size=64, num_layers=2, num_heads=2,
                  intermediate_size=256, unit_offset_norm=1)


def test_gemma_3_with_its_vision_tower_is_refused_with_the_reason():
    refused = ("model_type 'gemma3' is not one the estimator sizes: .*upload its text_config as the"
               " config.json \\(model_type gemma3_text\\)")
    with pytest.raises(ValueError, match=refused):
        model_from_hf_config({**GEMMA_2B, "model_type": "gemma3"}, name="g")
