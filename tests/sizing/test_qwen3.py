"""Qwen3 (config.json model_type "qwen3"): a llama-family layer with an RMSNorm over each head of
q and k before RoPE, and q/k/v/o biases only with attention_bias. Its saved activations are
measured against transformers' Qwen3ForCausalLM in tests/sizing/test_activations_measured.py."""

from __future__ import annotations

from dataclasses import replace

import pytest

from portal.sizing.estimator import TrainingConfig, estimate, get_preset, model_from_hf_config
from portal.sizing.estimator.activations import DT_AUTOCAST, DT_FP32, qk_norms
from portal.sizing.estimator.models import ModelSpec, count_params

QWEN3_0_6B = {  # Qwen/Qwen3-0.6B config.json (architecture fields): q is 2x the hidden size wide
    "model_type": "qwen3", "vocab_size": 151936, "hidden_size": 1024, "intermediate_size": 3072,
    "num_hidden_layers": 28, "num_attention_heads": 16, "num_key_value_heads": 8, "head_dim": 128,
    "max_position_embeddings": 40960, "attention_bias": False, "tie_word_embeddings": True}


def test_a_qwen3_config_is_a_llama_layer_with_per_head_q_and_k_norms():
    spec = model_from_hf_config(QWEN3_0_6B, name="Qwen/Qwen3-0.6B")
    assert (spec.family, spec.model_type, spec.qk_norm) == ("llama", "qwen3", True)
    assert (spec.q_dim, spec.kv_dim) == (2048, 1024)
    assert not (spec.qkv_bias or spec.o_bias or spec.mlp_bias)
    plain = replace(spec, model_type="llama", qk_norm=False)
    assert count_params(spec).total - count_params(plain).total == 2 * 128 * 28  # q_norm, k_norm
    assert count_params(spec).total == 596_049_920  # the model card's 0.6B, embeddings tied
    biased = model_from_hf_config({**QWEN3_0_6B, "attention_bias": True}, name="b")
    assert biased.qkv_bias and biased.o_bias and not biased.mlp_bias


def test_the_qwen3_8b_preset_has_its_published_parameter_count():
    assert count_params(get_preset("qwen3-8b")).total == 8_190_735_360  # "8.2B", 6.95B non-embedding


def test_the_norms_keep_an_fp32_copy_rsqrt_and_the_normalised_q_and_k_while_they_train():
    spec = get_preset("qwen3-8b")
    T, elems, rows = 4096, 4096 * (4096 + 1024), 4096 * (32 + 8)
    assert qk_norms(spec, DT_AUTOCAST, T, trained=True, fused=False) == 4 * elems + 4 * rows + 2 * elems
    assert qk_norms(spec, DT_AUTOCAST, T, trained=False, fused=False) == 4 * elems + 4 * rows  # LoRA
    assert qk_norms(spec, DT_FP32, T, trained=True, fused=True) == 4 * elems + 4 * rows  # compiled
    plain = replace(spec, model_type="llama", qk_norm=False)
    assert qk_norms(plain, DT_AUTOCAST, T, trained=True, fused=False) == 0
    training = TrainingConfig(micro_batch=1, seq_len=4096, checkpointing="none")
    with_norms = estimate(spec, training).per_gpu.activations
    without = estimate(replace(spec, model_type="llama", qk_norm=False), training).per_gpu.activations
    assert with_norms - without == 36 * qk_norms(spec, DT_AUTOCAST, T, trained=True, fused=False)


def test_qk_norm_is_a_hugging_face_llama_layer_only():
    with pytest.raises(ValueError, match="qk_norm .* needs family='llama' and implementation='hf'"):
        ModelSpec(name="g", family="gpt2", vocab_size=100, hidden_size=64, num_layers=2, num_heads=2,
                  intermediate_size=256, max_position_embeddings=64, qk_norm=True)
    with pytest.raises(ValueError, match="qk_norm must be true or false"):
        ModelSpec(name="q", family="llama", vocab_size=100, hidden_size=64, num_layers=2, num_heads=2,
                  intermediate_size=256, qk_norm="yes")


QWEN3_MOE = {"model_type": "qwen3_moe", "vocab_size": 151936, "hidden_size": 2048, "intermediate_size": 6144,
             "moe_intermediate_size": 768, "num_hidden_layers": 48, "num_attention_heads": 32,
             "num_key_value_heads": 4, "head_dim": 128, "num_experts": 128, "num_experts_per_tok": 8,
             "norm_topk_prob": True, "decoder_sparse_step": 1, "mlp_only_layers": []}


def test_a_qwen3_moe_config_routes_every_layer_to_experts_of_their_own_width():
    spec = model_from_hf_config(QWEN3_MOE, name="Qwen/Qwen3-30B-A3B")
    assert (spec.model_type, spec.qk_norm) == ("qwen3_moe", True)
    assert (spec.num_experts, spec.experts_per_token) == (128, 8)
    assert spec.intermediate_size == 768  # the experts' width, not the dense one
    params = count_params(spec)
    # the model card's "30.5B in total and 3.3B activated" (8 of 128 experts; embeddings and head counted)
    assert round(params.total / 1e9, 1) == 30.5 and 3.3e9 <= params.active < 3.4e9
    as_transformers_5_writes_it = {**QWEN3_MOE, "num_local_experts": 128, "num_experts": None}
    assert model_from_hf_config(as_transformers_5_writes_it, name="Qwen/Qwen3-30B-A3B") == spec


@pytest.mark.parametrize("dense", [{"mlp_only_layers": [0, 47]}, {"decoder_sparse_step": 2}])
def test_a_qwen3_moe_with_dense_layers_among_the_routed_ones_is_refused(dense):
    with pytest.raises(ValueError, match="dense MLP layers among the routed ones"):
        model_from_hf_config({**QWEN3_MOE, **dense}, name="mixed")
