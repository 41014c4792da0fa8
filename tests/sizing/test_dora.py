"""PEFT's DoRA (TrainingConfig.use_dora; tuners/lora/dora.py at 5d602fd): what it adds to LoRA, in
numbers. Its saved activations are measured against a replica of PEFT's forward in
tests/sizing/test_lora_frozen_activations.py (test_saved_bytes_match_peft_style_dora)."""

from dataclasses import replace

import pytest

from portal.sizing.estimator import TrainingConfig, estimate, get_preset
from portal.sizing.estimator.activations import DT_HALF, dora_weight_transient

LORA = TrainingConfig(precision="bf16", finetune="lora", lora_rank=32, lora_targets=("q_proj", "v_proj"),
                      micro_batch=2, seq_len=1024)


def test_each_adapted_linear_gains_a_magnitude_vector_and_keeps_its_two_outputs():
    m = get_preset("llama-3.1-8b")
    lora, dora = estimate(m, LORA), estimate(m, replace(LORA, use_dora=True))
    widths = m.q_dim + m.kv_dim  # q_proj's and v_proj's output features
    assert dora.params.trainable - lora.params.trainable == m.num_layers * widths
    tokens = 2 * 1024
    extra = dora.per_gpu.activations - lora.per_gpu.activations
    assert extra == m.num_layers * (2 * 2 * tokens + 3 * 2) * widths  # base and adapter outputs, 3 vectors


def test_its_weight_norm_comes_back_with_the_recomputed_layer():
    """W + s * BA and the identity run through the adapter exist for a moment at every call: under
    full recompute next to the recomputed layer's backward (the widest adapted linear's)."""
    m = replace(get_preset("llama-3.1-8b"), vocab_size=1024)  # the loss's own moment far smaller
    ckpt = replace(LORA, checkpointing="full", lora_targets=("down_proj",), use_dora=True)
    eye = 2 * m.intermediate_size ** 2  # down_proj reads the MLP width
    weight_sized = 3 * 2 * m.intermediate_size * m.hidden_size  # BA, s * BA, W + s * BA
    assert dora_weight_transient(m, ckpt, DT_HALF, 1) == eye + weight_sized
    dora, lora = estimate(m, ckpt).per_gpu, estimate(m, replace(ckpt, use_dora=False)).per_gpu
    magnitudes = dora.gradients - lora.gradients
    recomputed_outputs = (2 * 2 * 2 * 1024 + 3 * 2) * m.hidden_size  # down_proj's two outputs, 3 vectors
    assert dora.transient - lora.transient + magnitudes == eye + weight_sized + recomputed_outputs


@pytest.mark.parametrize("knobs, model, why", [
    ({"finetune": "qlora"}, "llama-3.1-8b", "use_dora is PEFT's DoRA on LoRA adapters"),
    ({"lora_targets": ("q_proj", "lm_head")}, "llama-3.1-8b", "DoRA on the output head"),
    ({}, "mixtral-8x7b", "modelled on the dense llama family's linears"),
    ({}, "gpt2-124m", "modelled on the dense llama family's linears"),
])
def test_what_it_is_not_modelled_for_is_refused_in_words(knobs, model, why):
    with pytest.raises(ValueError, match=why):
        estimate(get_preset(model), replace(LORA, use_dora=True, **knobs))
