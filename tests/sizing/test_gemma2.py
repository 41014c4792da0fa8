"""Gemma 2 (config.json model_type "gemma2"): Gemma's layer with norms on the attention's and the
MLP's outputs, every other layer sliding, and soft-capped attention scores and logits,
cap * tanh(x / cap). transformers has no SDPA path for the capped scores: it runs them eager (its
default for the model) or in FlashAttention-2. Saved activations are measured against
transformers' Gemma2ForCausalLM in tests/sizing/test_activations_measured.py and, under LoRA, in
tests/sizing/test_lora_frozen_activations.py."""

from __future__ import annotations

from dataclasses import replace

import pytest

from portal.sizing.catalog_data import catalog_from_seed
from portal.sizing.estimator import TrainingConfig, attention_for, estimate, get_preset, model_from_hf_config
from portal.sizing.estimator.activations import rope_tables
from portal.sizing.estimator.compute import SOFTCAP_BYTES, attention_score_bytes, loss_bytes_per_token
from portal.sizing.estimator.models import count_params
from portal.sizing.recommend import Goal, SearchOptions, Workload, recommend

GEMMA2_9B = {  # google/gemma-2-9b config.json (architecture fields)
    "model_type": "gemma2", "vocab_size": 256000, "hidden_size": 3584, "intermediate_size": 14336,
    "num_hidden_layers": 42, "num_attention_heads": 16, "num_key_value_heads": 8, "head_dim": 256,
    "max_position_embeddings": 8192, "query_pre_attn_scalar": 256, "sliding_window": 4096,
    "attn_logit_softcapping": 50.0, "final_logit_softcapping": 30.0}
EAGER = TrainingConfig(precision="bf16", micro_batch=2, seq_len=2048, attention="eager", checkpointing="none")


def test_a_gemma2_config_slides_on_every_other_layer_with_post_norms_and_soft_caps():
    spec = model_from_hf_config(GEMMA2_9B, name="google/gemma-2-9b")
    assert (spec.model_type, spec.unit_offset_norm, spec.post_norms) == ("gemma2", True, True)
    assert not spec.qk_norm
    assert (spec.softcap_scores, spec.softcap_logits, spec.shared_rope) == (True, True, True)
    assert (spec.sliding_window, spec.sliding_layers) == (4096, 21)  # layers 0, 2, 4 ... slide
    assert spec.tie_word_embeddings
    assert count_params(spec).total == 9_241_705_984  # as transformers builds it on the meta device
    assert count_params(get_preset("gemma-2-9b")).total == 9_241_705_984
    assert count_params(get_preset("gemma-2-2b")).total == 2_614_341_888
    assert count_params(get_preset("gemma-2-27b")).total == 27_227_128_320


def test_gemma2_configs_defaults_apply_where_a_key_is_absent_and_null_means_no_cap():
    bare = model_from_hf_config({"model_type": "gemma2"}, name="g")  # Gemma2Config(): the 2B's shape
    assert count_params(bare).total == 2_614_341_888
    assert (bare.softcap_scores, bare.softcap_logits, bare.sliding_layers) == (True, True, 13)
    uncapped = model_from_hf_config({**GEMMA2_9B, "attn_logit_softcapping": None}, name="g")
    assert (uncapped.softcap_scores, uncapped.softcap_logits) == (False, True)
    types = ["sliding_attention", "full_attention", "full_attention"] * 14
    assert model_from_hf_config({**GEMMA2_9B, "layer_types": types}, name="g").sliding_layers == 14


@pytest.mark.parametrize("bad, why", [
    ({"attn_logit_softcapping": 0}, "attn_logit_softcapping must be a finite number above 0"),
    ({"final_logit_softcapping": "30"}, "final_logit_softcapping must be a finite number above 0"),
    ({"sliding_window": None}, "a Gemma 2 config needs a sliding_window"),
    ({"layer_types": ["full_attention", "sliding_attention"] * 21}, "whose first layer attends fully"),
    ({"use_bidirectional_attention": True}, "use_bidirectional_attention is not one the estimator sizes"),
])
def test_what_gemma2_would_compute_otherwise_is_refused(bad, why):
    with pytest.raises(ValueError, match=why):
        model_from_hf_config({**GEMMA2_9B, **bad}, name="g")


def test_a_llama_config_with_soft_cap_keys_is_llama_its_code_ignores_them():
    spec = model_from_hf_config({**GEMMA2_9B, "model_type": "llama", "sliding_window": None}, name="l")
    assert (spec.softcap_scores, spec.softcap_logits) == (False, False)


def test_sdpa_is_refused_and_the_recommender_plans_the_eager_attention_transformers_runs():
    model = get_preset("gemma-2-2b")
    with pytest.raises(ValueError, match="no SDPA path for Gemma 2"):
        estimate(model, replace(EAGER, attention="sdpa"))
    assert attention_for(model, "sdpa") == "eager"
    uncapped = model_from_hf_config({**GEMMA2_9B, "attn_logit_softcapping": None}, name="g")  # still Gemma 2
    with pytest.raises(ValueError, match="no SDPA path for Gemma 2"):
        estimate(uncapped, replace(EAGER, attention="sdpa"))
    assert attention_for(uncapped, "sdpa") == "eager"
    assert attention_for(model, "flash") == "flash"
    assert attention_for(get_preset("gemma-3-1b"), "sdpa") == "sdpa"
    work = Workload(model="gemma-2-2b", finetune="lora", dataset_tokens=10**8, seq_len=4096,
                    global_batch_tokens=4096 * 64)
    plan = recommend(work, Goal("cheapest"), catalog_from_seed(), SearchOptions(top_n=1)).plans[0]
    assert plan.attention == "eager"


def test_capped_scores_keep_tanhs_output_per_layer_and_capped_logits_one_more_vocabulary_tensor():
    """tanh keeps its output for backward (the divide and multiply by a number keep nothing): one
    score-sized tensor per layer in the compute dtype, and one logits-sized one."""
    capped = get_preset("gemma-2-2b")
    b, s, m = EAGER.micro_batch, EAGER.seq_len, capped
    plain_scores = replace(capped, softcap_scores=False)
    diff = estimate(capped, EAGER).per_gpu.activations - estimate(plain_scores, EAGER).per_gpu.activations
    assert diff == m.num_layers * 2 * b * m.num_heads * s * s
    plain_logits = replace(capped, softcap_logits=False)
    logits = estimate(capped, EAGER).per_gpu.logits_and_loss
    diff = logits - estimate(plain_logits, EAGER).per_gpu.logits_and_loss
    assert diff == 2 * b * s * m.vocab_size
    flash = replace(EAGER, attention="flash")  # FlashAttention-2 caps inside its kernel
    assert estimate(capped, flash).per_gpu.activations == estimate(plain_scores, flash).per_gpu.activations


def test_capped_scores_and_logits_move_more_through_eager_kernels():
    capped = get_preset("gemma-2-2b")
    plain = replace(capped, softcap_scores=False, softcap_logits=False)
    per_score = sum(SOFTCAP_BYTES) * capped.num_heads * EAGER.seq_len ** 2 * capped.num_layers
    assert attention_score_bytes(capped, EAGER) - attention_score_bytes(plain, EAGER) == per_score
    assert attention_score_bytes(capped, replace(EAGER, attention="flash")) == 0
    assert loss_bytes_per_token(capped, EAGER) - loss_bytes_per_token(plain, EAGER) == \
        sum(SOFTCAP_BYTES) * capped.vocab_size
    fused = replace(EAGER, loss="fused")  # a fused linear cross-entropy caps inside its chunks
    assert loss_bytes_per_token(capped, fused) == loss_bytes_per_token(plain, fused)


def test_gemma2_layers_share_one_rotary_table_where_gemma3s_keep_one_per_layer_type():
    assert rope_tables(get_preset("gemma-2-9b")) == 1
    assert rope_tables(get_preset("gemma-3-1b")) == 2


def test_soft_caps_belong_to_a_gemma2_layer():
    spec = get_preset("gemma-2-2b")
    with pytest.raises(ValueError, match="model_type 'gemma' and its layer disagree"):
        replace(spec, model_type="gemma", post_norms=False, shared_rope=False)
    with pytest.raises(ValueError, match="softcap_scores .* needs family='llama' and implementation='hf'"):
        replace(get_preset("llama-3.1-8b"), model_type="", softcap_scores=True,
                implementation="trainyard-smoke")
