"""config.json's sliding window, read as transformers 5.24 reads it for each model type, and what
it costs (the bytes are measured in tests/sizing/test_sliding_window_measured.py)."""

from dataclasses import replace

import pytest

from portal.sizing.estimator import TrainingConfig, estimate, get_preset, model_from_hf_config
from portal.sizing.estimator.activations import DT_HALF, sliding_window_masks
from portal.sizing.estimator.compute import hardware_flops_per_token

SHAPE = {"vocab_size": 32000, "hidden_size": 1024, "num_hidden_layers": 4, "num_attention_heads": 8,
         "num_key_value_heads": 2, "intermediate_size": 2816}


def window_of(cfg: dict) -> tuple[int, int]:
    spec = model_from_hf_config({**SHAPE, **cfg}, name="m")
    return spec.sliding_window, spec.sliding_layers


def test_each_model_type_reads_its_window_as_transformers_does():
    assert window_of({"model_type": "mistral"}) == (4096, 4)  # MistralConfig's default
    assert window_of({"model_type": "mistral", "sliding_window": None}) == (0, 0)
    assert window_of({"model_type": "mixtral", "num_local_experts": 4, "num_experts_per_tok": 2}) == (0, 0)
    assert window_of({"model_type": "phi3", "sliding_window": 2047}) == (2047, 4)
    assert window_of({"model_type": "llama", "sliding_window": 2048}) == (0, 0)  # Llama has none
    assert window_of({"model_type": "qwen2", "sliding_window": 4096}) == (0, 0)  # use_sliding_window off
    assert window_of({"model_type": "qwen2", "use_sliding_window": True, "max_window_layers": 0}) == (4096, 4)
    assert window_of({"model_type": "qwen2", "use_sliding_window": True, "max_window_layers": 28}) == (0, 0)
    assert window_of({"model_type": "qwen3_moe", "use_sliding_window": True, "sliding_window": 1024,
                      "moe_intermediate_size": 256, "num_experts": 8, "num_experts_per_tok": 2}) == (1024, 4)
    assert (get_preset("mistral-7b").sliding_window, get_preset("phi-3-mini").sliding_window) == (4096, 2047)


@pytest.mark.parametrize("cfg, why", [
    ({"model_type": "qwen2", "use_sliding_window": True, "max_window_layers": 2},
     "attends fully on its first 2 layers and within sliding_window after"),
    ({"model_type": "qwen3", "use_sliding_window": True, "max_window_layers": "2"},
     "max_window_layers must be a whole number"),
    ({"model_type": "gemma3_text", "sliding_window": None}, "a Gemma 3 config needs a sliding_window"),
    ({"model_type": "gemma3_text", "layer_types": ["full_attention"] + ["sliding_attention"] * 3},
     "whose first layer attends fully"),
    ({"model_type": "gemma3_text", "layer_types": [{}] * 4}, "layer_types must list sliding_attention"),
    ({"model_type": "gemma3_text", "num_hidden_layers": "4"}, "num_layers must be a whole number"),
    ({"model_type": "gemma", "use_bidirectional_attention": True}, "use_bidirectional_attention"),
    ({"model_type": "mistral", "sliding_window": 0}, "sliding_window 0 and sliding_layers 4 go together"),
    ({"model_type": "mistral", "sliding_window": "4096"}, "sliding_window must be a whole number"),
])
def test_a_window_transformers_would_not_run_as_counted_is_refused_in_words(cfg, why):
    with pytest.raises(ValueError, match=why):
        model_from_hf_config({**SHAPE, **cfg}, name="m")


def test_mistral_past_its_window_keeps_sdpas_mask_and_computes_the_whole_square():
    """Every Mistral-7B layer slides (window 4096): below it SDPA runs is_causal; from it on each
    layer keeps the mask and k and v repeated to its 32 heads, and the square doubles its attention.
    FlashAttention-2 attends within the window: nothing kept, fewer FLOPs."""
    mistral = get_preset("mistral-7b")
    causal = replace(mistral, sliding_window=0, sliding_layers=0)
    for s, more in ((4095, False), (4096, True), (8192, True)):
        sdpa = TrainingConfig(precision="bf16", micro_batch=1, seq_len=s, attention="sdpa",
                              checkpointing="none")
        extra = estimate(mistral, sdpa).per_gpu.activations - estimate(causal, sdpa).per_gpu.activations
        assert extra == (sum(sliding_window_masks(mistral, sdpa, DT_HALF, 1, s)) if more else 0)
        assert (hardware_flops_per_token(mistral, sdpa) > hardware_flops_per_token(causal, sdpa)) == more
    flash = TrainingConfig(precision="bf16", micro_batch=1, seq_len=16384, attention="flash",
                           checkpointing="none")
    assert estimate(mistral, flash).per_gpu.activations == estimate(causal, flash).per_gpu.activations
    assert hardware_flops_per_token(mistral, flash) < hardware_flops_per_token(causal, flash)
