"""The decoder-layer class FSDP wraps comes from the model's Hugging Face model_type (issue 26,
item 7), and the plan's option lists are the estimator's."""

from __future__ import annotations

import pytest
import yaml

from portal.sizing.estimator import config as est_config
from portal.sizing.estimator import list_presets, model_from_hf_config
from portal.sizing.estimator.models import MODEL_TYPES
from portal.sizing.recommend.stacks import preset_spec
from provisioning.stack import inputs
from provisioning.stack.bundle import render_stack
from provisioning.stack.configs_common import LAYER_CLASSES, layer_class
from provisioning.stack.inputs import training_settings
from tests.provisioning.stack.variants import node, order

# What the name-prefix rules rendered for each preset before model_type (provisioning/stack/
# configs_common.py before issue 26): a plan stored then must render the same class now.
BEFORE = {"bert-base": "BertLayer", "bert-large": "BertLayer", "gpt2-124m": "GPT2Block",
          "gpt2-1.5b": "GPT2Block", "llama-2-7b": "LlamaDecoderLayer", "llama-2-13b": "LlamaDecoderLayer",
          "llama-2-70b": "LlamaDecoderLayer", "llama-3.1-8b": "LlamaDecoderLayer",
          "llama-3.1-70b": "LlamaDecoderLayer", "llama-3.1-405b": "LlamaDecoderLayer",
          "mistral-7b": "MistralDecoderLayer", "mixtral-8x7b": "MixtralDecoderLayer",
          "qwen2.5-7b": "Qwen2DecoderLayer", "qwen2.5-72b": "Qwen2DecoderLayer",
          # added with model_type: no plan stored before holds them
          "qwen3-8b": "Qwen3DecoderLayer", "qwen3-30b-a3b": "Qwen3MoeDecoderLayer",
          "phi-3-mini": "Phi3DecoderLayer", "phi-4": "Phi3DecoderLayer",
          "gemma-2b": "GemmaDecoderLayer", "gemma-7b": "GemmaDecoderLayer",
          "gemma-3-1b": "Gemma3DecoderLayer", "gemma-2-2b": "Gemma2DecoderLayer",
          "gemma-2-9b": "Gemma2DecoderLayer", "gemma-2-27b": "Gemma2DecoderLayer"}


def wrapped_class(plan: dict) -> str:
    rendered = render_stack(order=order("fsdp", plan=plan), node=node(1), nodes=[node(1)])
    return yaml.safe_load(rendered.file("accelerate.yaml").content)["fsdp_config"][
        "fsdp_transformer_layer_cls_to_wrap"]


@pytest.mark.parametrize("preset, cls", [("mistral-7b", "MistralDecoderLayer"),
                                         ("qwen2.5-7b", "Qwen2DecoderLayer"),
                                         ("qwen3-8b", "Qwen3DecoderLayer"),
                                         ("qwen3-30b-a3b", "Qwen3MoeDecoderLayer"),
                                         ("phi-4", "Phi3DecoderLayer"),
                                         ("gemma-7b", "GemmaDecoderLayer"),
                                         ("gemma-2-9b", "Gemma2DecoderLayer"),
                                         ("gemma-3-1b", "Gemma3DecoderLayer"),
                                         ("mixtral-8x7b", "MixtralDecoderLayer")])
def test_the_accelerate_config_wraps_the_decoder_layer_of_the_presets_model_type(preset, cls):
    assert wrapped_class({"model": preset, "model_spec": preset_spec(preset)}) == cls


def test_every_preset_is_tested_and_every_model_type_has_a_layer_class():
    assert set(BEFORE) == set(list_presets())
    assert set(LAYER_CLASSES) == set(MODEL_TYPES)


@pytest.mark.parametrize("preset", sorted(BEFORE))
def test_a_plan_stored_without_model_type_renders_the_layer_class_it_rendered_before(preset):
    spec = {k: v for k, v in preset_spec(preset).items() if k != "model_type"}
    assert training_settings({"model": preset, "model_spec": spec}, "fsdp", world_size=8).model_type \
        == preset_spec(preset)["model_type"]
    assert layer_class(training_settings({"model": preset, "model_spec": spec}, "fsdp",
                                         world_size=8).model_type) == BEFORE[preset]


def test_a_partial_plan_names_the_preset_and_an_empty_one_is_the_default_llama():
    assert wrapped_class({"model": "mistral-7b", "model_spec": {"family": "llama", "hidden_size": 4096}}) \
        == "MistralDecoderLayer"
    assert wrapped_class({}) == "LlamaDecoderLayer"


def test_the_name_is_not_read_the_model_type_is():
    """A Qwen2 config.json uploaded under a name that reads like another model."""
    spec = model_from_hf_config({"model_type": "qwen2", "vocab_size": 32000, "hidden_size": 1024,
                                 "num_hidden_layers": 4, "num_attention_heads": 8,
                                 "intermediate_size": 2816}, name="mistral-finetune")
    plan = {"model": spec.name, "model_spec": {f: getattr(spec, f) for f in spec.__dataclass_fields__}}
    assert wrapped_class(plan) == "Qwen2DecoderLayer"


def test_an_unknown_model_type_has_no_layer_class():
    with pytest.raises(ValueError, match="no decoder-layer class"):
        layer_class("falcon")


def test_the_plan_option_lists_are_the_estimators():
    assert inputs.SHARDING is est_config.SHARDING
    assert inputs.OFFLOAD is est_config.OFFLOAD
    assert inputs.CHECKPOINTING_POLICIES is est_config.CHECKPOINTING_POLICIES
    assert inputs.ATTENTION is est_config.ATTENTION
    assert inputs.PRECISIONS is est_config.PRECISIONS
    assert inputs.FINETUNE is est_config.FINETUNE
    for value in est_config.CHECKPOINTING_POLICIES:
        assert training_settings({"checkpointing": value}, "fsdp").checkpointing == value
    with pytest.raises(ValueError, match="checkpointing must be one of"):
        training_settings({"checkpointing": "sometimes"}, "fsdp")


@pytest.mark.parametrize("model_type", sorted(LAYER_CLASSES))
def test_every_layer_class_is_one_the_nodes_transformers_defines(model_type):
    """The class FSDP wraps must exist in the transformers the nodes install (the stacks pin the
    version the test environment has: provisioning/stack/packages.py, pyproject.toml)."""
    import importlib

    pytest.importorskip("transformers")
    from transformers.models.auto.configuration_auto import model_type_to_module_name

    module = model_type_to_module_name(model_type)
    modeling = importlib.import_module(f"transformers.models.{module}.modeling_{module}")
    assert hasattr(modeling, LAYER_CLASSES[model_type])
