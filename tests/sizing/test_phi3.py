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
    split = replace(spec, model_type="llama", fused_projections=False)
    assert count_params(spec).total == count_params(split).total
    assert round(count_params(get_preset("phi-4")).total / 1e9, 1) == 14.7  # "14B", 14.7B as built


def test_lora_on_the_fused_linears_keeps_one_input_where_separate_ones_keep_three():
    """One adapter on qkv_proj reads the attention norm's output once; three on q/k/v each drop
    their own copy: two dropped copies (bf16, and CUDA dropout's 1-byte mask) and two rank-r
    middles more per layer, less the first layer's two masks (its input needs no gradient)."""
    spec = get_preset("phi-3-mini")
    split = replace(spec, model_type="llama", fused_projections=False)
    knobs = {"finetune": "lora", "lora_rank": 16, "lora_dropout": 0.05, "micro_batch": 1, "seq_len": 2048,
             "checkpointing": "none", "precision": "bf16"}
    fused = estimate(spec, TrainingConfig(**knobs, lora_targets=("qkv_proj",))).per_gpu.activations
    three = estimate(split, TrainingConfig(**knobs, lora_targets=("q_proj", "k_proj", "v_proj")))
    T, h, L = 2048, spec.hidden_size, spec.num_layers
    assert three.per_gpu.activations - fused == L * T * (2 * h * (2 + 1) + 2 * 16 * 2) - T * 2 * h * 1


def test_a_whole_split_set_names_the_fused_linear_and_part_of_one_is_refused():
    """PEFT adapts a module as a whole: q_proj, k_proj and v_proj together (the default targets
    among them) are Phi-3's qkv_proj, gate_proj with up_proj its gate_up_proj; q_proj alone
    cannot be adapted on it and is refused with the names it has."""
    spec = get_preset("phi-4")
    by_default = estimate(spec, TrainingConfig(finetune="qlora"))  # q, k, v, o
    as_named = estimate(spec, TrainingConfig(finetune="qlora", lora_targets=("qkv_proj", "o_proj")))
    assert by_default.per_gpu == as_named.per_gpu
    split_mlp = TrainingConfig(finetune="lora", lora_targets=("gate_proj", "up_proj", "down_proj"))
    fused_mlp = TrainingConfig(finetune="lora", lora_targets=("gate_up_proj", "down_proj"))
    assert estimate(spec, split_mlp).per_gpu == estimate(spec, fused_mlp).per_gpu
    with pytest.raises(ValueError, match=r"part of a linear this model fuses: Phi-3 has one qkv_proj"):
        estimate(spec, TrainingConfig(finetune="lora", lora_targets=("q_proj", "v_proj")))


def test_torchtitan_and_its_op_level_checkpointing_are_for_llamas_own_layer():
    """torchtitan's op-level policy counts the seven separate linears of Llama's layer."""
    from portal.sizing.recommend.regimes import REGIMES

    for preset in ("phi-4", "qwen3-8b", "gemma-7b", "gemma-2-2b", "gemma-3-1b"):
        assert not REGIMES["torchtitan"].runs(get_preset(preset))
        with pytest.raises(ValueError, match="not for experts, fused projections, q/k norms or Gemma's"):
            estimate(get_preset(preset), TrainingConfig(checkpointing="selective-op"))
    assert REGIMES["torchtitan"].runs(get_preset("llama-3.1-8b"))


def test_a_model_type_and_its_layer_flags_must_agree():
    spec = get_preset("phi-3-mini")
    with pytest.raises(ValueError, match="model_type 'phi3' and its layer disagree"):
        replace(spec, fused_projections=False)
    with pytest.raises(ValueError, match="model_type 'llama' and its layer disagree"):
        replace(get_preset("llama-2-7b"), fused_projections=True)
    assert not replace(spec, model_type="", fused_projections=False).fused_projections  # no type: free


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
