"""The model's architecture is its config.json's ``model_type``, carried by the ModelSpec and the
stored plan, never guessed from its name (issue 26, item 7)."""

from __future__ import annotations

import ast
import json
from dataclasses import fields
from pathlib import Path

import pytest

from portal.catalog.capabilities import MODEL_FAMILIES
from portal.sizing.catalog_data import catalog_from_seed
from portal.sizing.estimator import (
    estimate,
    get_preset,
    list_presets,
    model_from_hf_config,
    model_from_params,
)
from portal.sizing.estimator.config import ParallelConfig, TrainingConfig
from portal.sizing.estimator.models import MODEL_TYPES, ModelSpec, count_params
from portal.sizing.recommend import Goal, Plan, SearchOptions, Workload, recommend
from portal.sizing.recommend.stacks import family_of, model_family, model_type_of, preset_spec
from provisioning.stack.configs_common import LAYER_CLASSES

REPO_ROOT = Path(__file__).resolve().parents[2]
LLAMA_SHAPE = {"vocab_size": 32000, "hidden_size": 1024, "num_hidden_layers": 4, "num_attention_heads": 8,
               "num_key_value_heads": 4, "intermediate_size": 2816, "max_position_embeddings": 4096}
CONFIGS = {
    "llama": {"model_type": "llama", **LLAMA_SHAPE},
    "mistral": {"model_type": "mistral", **LLAMA_SHAPE, "sliding_window": None},  # Llama's layer then
    "qwen2": {"model_type": "qwen2", **LLAMA_SHAPE},
    "qwen3": {"model_type": "qwen3", **LLAMA_SHAPE, "head_dim": 256},
    "phi3": {"model_type": "phi3", **LLAMA_SHAPE, "resid_pdrop": 0.0, "embd_pdrop": 0.0},
    "gemma": {"model_type": "gemma", **LLAMA_SHAPE, "head_dim": 256},
    "gemma2": {"model_type": "gemma2", **LLAMA_SHAPE, "head_dim": 256},
    "gemma3_text": {"model_type": "gemma3_text", **LLAMA_SHAPE, "head_dim": 256, "sliding_window": 512},
    "qwen3_moe": {"model_type": "qwen3_moe", **LLAMA_SHAPE, "moe_intermediate_size": 512, "num_experts": 8,
                  "num_experts_per_tok": 2},
    "mixtral": {"model_type": "mixtral", **LLAMA_SHAPE, "num_local_experts": 4, "num_experts_per_tok": 2},
    "gpt2": {"model_type": "gpt2", "vocab_size": 50257, "n_embd": 768, "n_layer": 2, "n_head": 12,
             "n_positions": 1024},
    "bert": {"model_type": "bert", "vocab_size": 30522, "hidden_size": 768, "num_hidden_layers": 2,
             "num_attention_heads": 12, "intermediate_size": 3072},
}
PRESET_TYPES = {"llama-2-7b": "llama", "llama-3.1-8b": "llama", "mistral-7b": "mistral",
                "mixtral-8x7b": "mixtral", "qwen2.5-7b": "qwen2", "qwen2.5-72b": "qwen2", "qwen3-8b": "qwen3",
                "qwen3-30b-a3b": "qwen3_moe", "phi-3-mini": "phi3", "phi-4": "phi3",
                "gemma-2b": "gemma", "gemma-7b": "gemma", "gemma-2-2b": "gemma2", "gemma-2-9b": "gemma2",
                "gemma-2-27b": "gemma2", "gemma-3-1b": "gemma3_text",
                "gpt2-124m": "gpt2", "bert-base": "bert"}


def spec_dict(spec: ModelSpec) -> dict:
    return {f.name: getattr(spec, f.name) for f in fields(spec)}


@pytest.mark.parametrize("model_type", sorted(CONFIGS))
def test_model_type_is_parsed_from_config_json(model_type):
    spec = model_from_hf_config(CONFIGS[model_type], name="acme/some-model")
    assert spec.model_type == model_type
    assert spec.family == MODEL_TYPES[model_type]


def test_every_supported_model_type_is_tested():
    assert set(CONFIGS) == set(MODEL_TYPES)


@pytest.mark.parametrize("preset", list_presets())
def test_every_preset_carries_its_config_model_type(preset):
    raw = json.loads((REPO_ROOT / "portal/sizing/estimator/presets.json").read_text())["presets"][preset]
    assert get_preset(preset).model_type == raw["config"]["model_type"]
    assert preset_spec(preset)["model_type"] == raw["config"]["model_type"]


def test_model_type_changes_no_number_and_no_cache_key():
    """Declared like ``source``: out of equality and hash, so every estimate is what it was."""
    mistral = model_from_hf_config(CONFIGS["mistral"], name="m")
    llama = model_from_hf_config(CONFIGS["llama"], name="m")
    assert mistral == llama and hash(mistral) == hash(llama)
    assert count_params(mistral) == count_params(llama)
    training, parallel = TrainingConfig(micro_batch=1, seq_len=512), ParallelConfig(dp=1)
    assert estimate(mistral, training, parallel).per_gpu == estimate(llama, training, parallel).per_gpu


def test_a_model_type_of_another_family_is_refused():
    with pytest.raises(ValueError, match="model_type 'gpt2' is not of the llama family"):
        ModelSpec(**{**spec_dict(get_preset("llama-2-7b")), "model_type": "gpt2"})
    with pytest.raises(ValueError, match="model_type must be text"):
        ModelSpec(**{**spec_dict(get_preset("llama-2-7b")), "model_type": 3})


def test_a_model_known_by_its_parameter_count_has_its_familys_model_type():
    assert model_from_params(10**9, 16, 2048, 16, 32000).model_type == "llama"
    assert model_from_params(10**8, 12, 768, 12, 50257, family="gpt2").model_type == "gpt2"
    assert model_from_params(10**9, 16, 2048, 16, 32000, model_type="mistral").model_type == "mistral"


# --- the family the stacks build: from model_type, not the name -----------------------------------
@pytest.mark.parametrize("model_type, family", [
    ("llama", "llama"), ("mistral", "mistral"), ("qwen2", "qwen2"), ("qwen3", "qwen3"),
    ("mixtral", "mixtral"), ("qwen3_moe", "qwen3_moe"), ("phi3", "phi3"), ("gemma", "gemma"),
    ("gemma3_text", "gemma3_text"), ("gpt2", "gpt2"), ("bert", "bert")])
def test_the_family_is_the_model_types_whatever_the_name(model_type, family):
    for name in ("acme/model", "mistral-lookalike", "qwen2-lookalike", "mixtral-lookalike"):
        spec = model_from_hf_config(CONFIGS[model_type], name=name)
        assert family_of(spec) == family, name
        assert model_family(name, spec_dict(spec)) == family, name


def test_a_qwen2_config_without_biases_is_still_qwen2():
    """The bias rule is no longer what tells Qwen2 apart: its model_type is."""
    spec = ModelSpec(**{**spec_dict(model_from_hf_config(CONFIGS["qwen2"], name="q")), "qkv_bias": False})
    assert family_of(spec) == "qwen2"


@pytest.mark.parametrize("preset", sorted(PRESET_TYPES))
def test_a_spec_stored_before_model_type_reads_the_presets(preset):
    old = {k: v for k, v in preset_spec(preset).items() if k != "model_type"}
    assert model_type_of(preset, old) == PRESET_TYPES[preset]
    assert model_family(preset, old) == model_family(preset, preset_spec(preset))


@pytest.mark.parametrize("model_type, expected", [
    ("llama", "llama"), ("mistral", "llama"), ("qwen2", "qwen2"), ("qwen3", "qwen3"), ("mixtral", "mixtral"),
    ("qwen3_moe", "qwen3_moe"), ("phi3", "phi3"), ("gemma", "gemma"), ("gemma3_text", "gemma3_text"),
    ("gpt2", "gpt2"), ("bert", "bert")])
def test_a_spec_stored_before_model_type_without_a_preset_reads_its_family(model_type, expected):
    """No preset of that name: the estimator family's type (Mixtral's experts, Qwen2's q/k/v
    biases, Qwen3's q/k norms, Phi-3's fused projections, Gemma's unit-offset norms and Gemma 3's
    post-norms are in the
    spec's numbers; Mistral's architecture is not, so it reads as llama). Plans stored before
    model_type got theirs written by quotes migration 0004 / orders 0009."""
    old = {k: v for k, v in spec_dict(model_from_hf_config(CONFIGS[model_type], name="x")).items()
           if k != "model_type"}
    assert model_type_of("acme/custom", old) == expected


def test_a_stored_plan_carries_model_type_and_an_older_one_reads_the_presets():
    work = Workload(model="mistral-7b", dataset_tokens=10**8, seq_len=512, global_batch_tokens=512 * 64)
    plan = recommend(work, Goal("cheapest"), catalog_from_seed(), SearchOptions(top_n=1)).plans[0]
    data = json.loads(json.dumps(plan.to_dict()))
    assert data["model_spec"]["model_type"] == "mistral"
    assert Plan.from_dict(data).model_spec.model_type == "mistral"
    del data["model_spec"]["model_type"]
    older = Plan.from_dict(data)
    assert older.model_spec.model_type == "" and older.model_spec == plan.model_spec
    assert family_of(older.model_spec) == "mistral"
    assert model_family(data["model"], data["model_spec"]) == "mistral"


# --- no name prefix matching left ----------------------------------------------------------------
MODULES = ("portal/sizing/recommend/stacks.py", "provisioning/stack/configs_common.py",
           "provisioning/stack/inputs.py", "provisioning/stack/accelerate.py")


@pytest.mark.parametrize("path", MODULES)
def test_no_module_that_reads_the_architecture_matches_a_name_prefix(path):
    tree = ast.parse((REPO_ROOT / path).read_text())
    calls = [node.lineno for node in ast.walk(tree) if isinstance(node, ast.Call)
             and isinstance(node.func, ast.Attribute) and node.func.attr == "startswith"]
    assert calls == [], f"{path}: startswith( on lines {calls}"


def test_every_model_type_is_a_stack_family_with_a_layer_class():
    """The tables stay in step: a model type the estimator parses is a family the stacks name
    (the model_type itself) and one FSDP can wrap."""
    assert set(MODEL_TYPES) == set(LAYER_CLASSES)
    assert set(MODEL_TYPES) <= set(MODEL_FAMILIES)


@pytest.mark.parametrize("preset, finetune, flags", [
    ("qwen3-8b", "lora", {"qk_norm": True}),
    ("gemma-7b", "lora", {"unit_offset_norm": True}),
    ("gemma-3-1b", "full", {"qk_norm": True, "post_norms": True, "sliding_layers": 22}),
    ("gemma-2-9b", "lora", {"softcap_scores": True, "softcap_logits": True, "sliding_layers": 21}),
])
def test_the_recommender_sells_a_server_for_a_newer_model_type_on_a_stack_that_builds_it(
        preset, finetune, flags):
    work = Workload(model=preset, finetune=finetune, dataset_tokens=10**8, seq_len=4096,
                    global_batch_tokens=4096 * 64)
    plan = recommend(work, Goal("cheapest"), catalog_from_seed(), SearchOptions(top_n=1)).plans[0]
    data = plan.to_dict()
    assert data["model_spec"]["model_type"] == PRESET_TYPES[preset]
    assert {k: data["model_spec"][k] for k in flags} == flags
    assert data["stack"] in {"ddp", "fsdp", "deepspeed"}  # torchtitan builds none of them
    assert Plan.from_dict(data).model_spec == plan.model_spec  # a stored plan reads back whole
