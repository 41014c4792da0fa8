"""Phi-3 and Phi-4 (config.json model_type "phi3"): a llama-family layer whose q/k/v are one
qkv_proj and whose gate/up are one gate_up_proj. Its saved activations, full and under
PEFT-style LoRA on the fused modules, are measured against transformers' Phi3ForCausalLM in
tests/sizing/test_activations_measured.py and test_lora_frozen_activations.py."""

from __future__ import annotations

from dataclasses import replace

import pytest

from portal.sizing.catalog_data import catalog_from_seed
from portal.sizing.estimator import TrainingConfig, estimate, get_preset, model_from_hf_config
from portal.sizing.estimator.models import count_params, param_tensors
from portal.sizing.recommend import Goal, SearchOptions, Workload, recommend
from portal.sizing.recommend.regimes import lora_targets_for
from portal.sizing.recommend.stacks import preset_spec
from provisioning.stack.adapters import adapters_config
from provisioning.stack.inputs import stack_inputs
from tests.provisioning.stack.variants import node, order

PHI3_MINI_PARAMS = 3_821_079_552  # keras-hub's phi3 presets' metadata for Phi-3-mini (4k and 128k)


def test_phi3_fuses_q_k_v_and_gate_up_into_one_linear_each():
    spec = get_preset("phi-3-mini")
    assert spec.fused_projections and spec.model_type == "phi3"
    names = {t.name for t in param_tensors(spec) if t.group == "layer"}
    assert {"qkv_proj", "gate_up_proj", "o_proj", "down_proj"} <= names
    assert not names & {"q_proj", "k_proj", "v_proj", "gate_proj", "up_proj"}
    assert count_params(spec).total == PHI3_MINI_PARAMS
    assert count_params(spec).total == count_params(replace(spec, fused_projections=False)).total
    assert round(count_params(get_preset("phi-4")).total / 1e9, 1) == 14.7  # "14B", 14.7B as built


def test_lora_on_the_fused_linears_keeps_one_input_where_separate_ones_keep_three():
    """One adapter on qkv_proj reads the attention norm's output once; three on q/k/v each drop
    their own copy: two dropped copies (bf16, and CUDA dropout's 1-byte mask) and two rank-r
    middles more per layer, less the first layer's two masks (its input needs no gradient)."""
    spec = get_preset("phi-3-mini")
    split = replace(spec, fused_projections=False)
    knobs = {"finetune": "lora", "lora_rank": 16, "lora_dropout": 0.05, "micro_batch": 1, "seq_len": 2048,
             "checkpointing": "none", "precision": "bf16"}
    fused = estimate(spec, TrainingConfig(**knobs, lora_targets=("qkv_proj",))).per_gpu.activations
    three = estimate(split, TrainingConfig(**knobs, lora_targets=("q_proj", "k_proj", "v_proj")))
    T, h, L = 2048, spec.hidden_size, spec.num_layers
    assert three.per_gpu.activations - fused == L * T * (2 * h * (2 + 1) + 2 * 16 * 2) - T * 2 * h * 1


def test_split_names_on_a_fused_model_are_refused_with_the_names_it_has():
    with pytest.raises(ValueError, match=r"Phi-3 has one qkv_proj and one gate_up_proj"):
        estimate(get_preset("phi-4"), TrainingConfig(finetune="lora", lora_targets=("q_proj", "v_proj")))


def test_residual_dropout_is_refused_not_sized_without_its_masks():
    cfg = {"model_type": "phi3", "vocab_size": 32064, "hidden_size": 3072, "intermediate_size": 8192,
           "num_hidden_layers": 32, "num_attention_heads": 32, "resid_pdrop": 0.1}
    with pytest.raises(ValueError, match="residual or embedding dropout"):
        model_from_hf_config(cfg, name="phi-with-dropout")


def test_the_recommender_and_the_stack_adapt_the_fused_modules():
    spec = get_preset("phi-4")
    assert lora_targets_for(spec) == ("qkv_proj", "o_proj", "gate_up_proj", "down_proj")
    work = Workload(model="phi-4", finetune="lora", dataset_tokens=10**8, seq_len=4096,
                    global_batch_tokens=4096 * 64)
    plan = recommend(work, Goal("cheapest"), catalog_from_seed(), SearchOptions(top_n=1)).plans[0].to_dict()
    assert list(plan["estimator_regime"]["training"]["lora_targets"]) == ["qkv_proj", "o_proj",
                                                                          "gate_up_proj", "down_proj"]
    # a plan without the regime's targets: the stack's own for the family, Phi-3's fused names
    plan = {"model": "phi-4", "model_spec": preset_spec("phi-4"), "precision": "bf16-mixed", "seq_len": 4096,
            "micro_batch": 1, "grad_accum": 2, "finetune": "lora", "sharding": "fsdp-full-shard"}
    inputs = stack_inputs(order=order("fsdp", plan=plan), node=node(1), nodes=[node(1)])
    assert adapters_config(inputs)["lora"]["target_modules"] == ["qkv_proj", "o_proj", "gate_up_proj",
                                                                  "down_proj"]
