"""The typed, versioned Plan: written by the recommender, stored as JSON, read back and re-estimated."""

import json

import pytest

from portal.sizing.catalog_data import catalog_from_seed
from portal.sizing.estimator import ESTIMATOR_VERSION, list_presets, model_from_hf_config
from portal.sizing.recommend import (
    PLAN_SCHEMA_VERSION,
    Goal,
    Plan,
    SearchOptions,
    Workload,
    plan_estimate,
    recommend,
)
from portal.sizing.recommend.plan import figure_problems, number_keys

# A config.json model (not a preset): its numbers must travel with the plan.
TINY_LLAMA = {"model_type": "llama", "vocab_size": 32000, "hidden_size": 2048, "num_hidden_layers": 16,
              "num_attention_heads": 16, "num_key_value_heads": 8, "intermediate_size": 5632,
              "max_position_embeddings": 4096}


@pytest.fixture(scope="module")
def catalog():
    return catalog_from_seed()


def plans_for(model, catalog, **workload):
    """Every ranked plan for a small job (seq_len 512 suits every preset, BERT included)."""
    work = Workload(model=model, dataset_tokens=10**8, seq_len=512, global_batch_tokens=512 * 64,
                    **workload)
    return recommend(work, Goal("cheapest"), catalog, SearchOptions(top_n=3)).plans


def stored(plan: Plan) -> dict:
    """What a quote or an order keeps: the plan's JSON, through a JSON column."""
    return json.loads(json.dumps(plan.to_dict()))


@pytest.mark.parametrize("model", [*list_presets(), "config.json"])
def test_a_stored_plan_re_estimates_to_the_same_bytes(catalog, model):
    spec = model_from_hf_config(TINY_LLAMA, name="acme/tiny-llama") if model == "config.json" else model
    for plan in plans_for(spec, catalog):
        data = stored(plan)
        again = plan_estimate(Plan.from_dict(data))
        assert again.per_gpu.total == data["per_gpu_total_bytes"] == plan.memory.total
        assert {k: getattr(again.per_gpu, k) for k in data["memory_breakdown_bytes"]} == \
            data["memory_breakdown_bytes"]
        assert again.world_size == plan.gpus


def test_the_plan_carries_what_a_launch_config_needs(catalog):
    plan = plans_for("llama-3.1-8b", catalog, optimizer="adamw-8bit", attention="flash")[0]
    data = stored(plan)
    assert data["schema_version"] == PLAN_SCHEMA_VERSION
    assert data["model_spec"]["hidden_size"] == 4096 and data["model_spec"]["num_layers"] == 32
    assert (data["optimizer"], data["attention"], data["seq_len"], data["global_batch_tokens"]) == \
        ("adamw-8bit", "flash", 512, 512 * 64)
    for key in ("precision", "checkpointing", "micro_batch", "grad_accum", "dp", "tp", "pp", "ep",
                "sharding", "offload", "stack", "stack_settings", "network", "nvme_option",
                "storage_provider", "train_tokens"):
        assert key in data, key
    again = Plan.from_dict(data)
    assert again.model_spec == plan.model_spec and again.stack == plan.stack
    assert again.training_config() == plan.training_config()
    assert again.parallel_config() == plan.parallel_config()


def test_extra_keys_of_a_stored_plan_are_ignored(catalog):
    data = stored(plans_for("mistral-7b", catalog)[0]) | {"workload": {"goal": "cheapest"}, "rank": 1,
                                                          "strategy_label": "DDP"}
    assert Plan.from_dict(data).model == "mistral-7b"


@pytest.mark.parametrize(("change", "message"), [
    ({"schema_version": None}, "has no schema_version"),
    ({"schema_version": 99}, "schema_version 99 is not one this server reads"),
    ({"seq_len": None}, "lacks seq_len"),
    ({"seq_len": "long"}, "seq_len must be a whole number"),
    ({"tokens_per_second": True}, "tokens_per_second must be a number"),
    ({"model_spec": None}, "lacks model_spec"),
    ({"model_spec": {"name": "x"}}, "model_spec is incomplete"),
    ({"memory_breakdown_bytes": {"weights": 1}}, "lacks memory_breakdown_bytes"),
    ({"per_gpu_total_bytes": 1}, "not the sum of memory_breakdown_bytes"),
    ({"precision": "fp64"}, "precision='fp64' is not supported"),
    ({"warnings": "none"}, "warnings must be a list"),
])
def test_a_bad_or_partial_plan_is_a_value_error_that_says_what(catalog, change, message):
    data = stored(plans_for("llama-3.1-8b", catalog)[0])
    data.update({k: v for k, v in change.items() if v is not None})
    for key in [k for k, v in change.items() if v is None]:
        del data[key]
    with pytest.raises(ValueError, match=message):
        Plan.from_dict(data)


@pytest.mark.parametrize(("regime", "message"), [
    ({"training": {"dropout": "0.1"}}, "estimator_regime does not fit the estimator"),
    ({"parallel": {"zero": {"overlap_comm": [1]}}}, "zero.overlap_comm must be true, false or null"),
    ({"parallel": {"dp": 3}}, r"estimator_regime.parallel.dp is not an estimator knob"),
    ({"training": {"micro_batch": 64}}, r"estimator_regime.training.micro_batch is not an estimator knob"),
])
def test_a_stored_plans_regime_is_checked_and_may_not_restate_the_plan(catalog, regime, message):
    """A hand-edited estimator_regime is a ValueError (a 400 for the API), never a TypeError, and
    cannot re-estimate the plan at a layout other than the one the plan states."""
    data = stored(plans_for("llama-3.1-8b", catalog)[0]) | {"estimator_regime": regime}
    with pytest.raises(ValueError, match=message):
        Plan.from_dict(data)


def test_figures_are_checked_by_the_plans_own_field_types():
    numbers = set(number_keys())
    assert {"nodes", "tp", "nvme_tb", "train_hours", "per_gpu_total_bytes", "headroom_bytes"} <= numbers
    assert "model" not in number_keys() and "network" not in number_keys()
    assert figure_problems({"nodes": 2, "model": "x"}) == []
    assert figure_problems({"nodes": "two", "memory_breakdown_bytes": {"weights": "big"}}) == [
        "nodes", "memory_breakdown_bytes (each term)"]


def test_a_plan_carries_the_estimator_version_that_sized_it(catalog):
    data = stored(plans_for("llama-3.1-8b", catalog)[0])
    assert data["estimator_regime"]["version"] == ESTIMATOR_VERSION
    plan = Plan.from_dict(data)
    assert plan.estimator_version == ESTIMATOR_VERSION and not plan.from_older_model
    with pytest.raises(ValueError, match="estimator_regime.version must be a whole number from 1"):
        Plan.from_dict(data | {"estimator_regime": {**data["estimator_regime"], "version": 99}})


def test_a_qlora_plan_sized_by_the_older_model_is_marked_so_and_a_new_one_re_estimates_to_its_bytes(catalog):
    """Issue 33 shards QLoRA's 4-bit weights where the stacks store them in bf16: a new plan's
    regime carries quant_storage and re-estimates to its stored bytes; a plan stored before
    estimator versions reads as version 1 and is marked as sized by an older model (its
    version-1 bytes kept the 4-bit weights whole on every GPU; today's re-estimate shards them)."""
    work = Workload(model="llama-2-13b", finetune="qlora", dataset_tokens=10**8, seq_len=512,
                    global_batch_tokens=512 * 64)
    plans = [p for strategy in ("fsdp", "zero3") for p in recommend(
        work, Goal("cheapest"), catalog, SearchOptions(top_n=3, strategies=(strategy,))).plans]
    sharded = [p for p in plans if p.sharding in ("fsdp-full-shard", "fsdp-hybrid", "zero3")]
    assert sharded
    for plan in sharded:
        data = stored(plan)
        assert data["estimator_regime"]["training"]["quant_storage"] == "bf16"
        assert plan_estimate(Plan.from_dict(data)).per_gpu.total == data["per_gpu_total_bytes"]
    old = stored(sharded[0])
    old["estimator_regime"] = {k: v for k, v in old["estimator_regime"].items() if k != "version"}
    old["estimator_regime"]["training"].pop("quant_storage")
    older = Plan.from_dict(old)
    assert older.estimator_version == 1 and older.from_older_model
    assert plan_estimate(older).per_gpu.total == old["per_gpu_total_bytes"]  # today's model: auto = bf16


@pytest.mark.parametrize("version", [2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12])
def test_a_full_finetuning_plan_of_an_older_version_is_marked_older_and_keeps_its_bytes(catalog, version):
    """Version 3 (attention at its kernel's rate on Hopper) changes step times, not bytes; version
    4 changes LoRA/QLoRA activations only, version 5 QLoRA under parameter offload only, version 6
    step times only (the compute under hidden communication), version 7 bitsandbytes QLoRA's
    dequantised weight only, version 8 step times only (SDPA's attention at cuDNN's rate on
    Hopper), version 9 the bytes of LoRA on the output head only, version 10 those of eager
    attention with one kv head at micro-batch 1 and of Qwen3's q/k norms only, version 11 those of
    sliding-window layers (Mistral, Phi-3) under SDPA only, version 12 those of Gemma 2 and of LoRA
    plans (autocast weight casts and o_proj's input copy, eager attention's first layer) only,
    version 13 the times of DoRA plans only: a full fine-tuning plan of Llama 3.1 that version 2 to
    12 sized reads as from an older model (its time may differ today) and still re-estimates to the
    bytes it stored, term by term."""
    assert ESTIMATOR_VERSION == 13
    for plan in plans_for("llama-3.1-8b", catalog)[:3]:
        data = stored(plan)
        data["estimator_regime"] = {**data["estimator_regime"], "version": version}
        older = Plan.from_dict(data)
        assert older.estimator_version == version and older.from_older_model
        again = plan_estimate(older).per_gpu
        assert again.total == data["per_gpu_total_bytes"]
        terms = data["memory_breakdown_bytes"]
        assert {k: getattr(again, k) for k in terms} == terms


@pytest.mark.parametrize("finetune", ["lora", "qlora"])
def test_a_lora_plan_is_sized_with_its_stacks_adapters_and_re_estimates_to_its_bytes(catalog, finetune):
    """Version 4: a LoRA/QLoRA plan carries the adapters adapters.json renders (every linear of the
    blocks, LoRA dropout 0.05) in its regime and re-estimates to its stored bytes; without them (a
    version-3 plan) it is marked as from an older model, which sized the adapters on q, k, v, o
    with the activations of full fine-tuning."""
    plans = plans_for("llama-3.1-8b", catalog, finetune=finetune)
    assert plans
    for plan in plans:
        data = stored(plan)
        training = data["estimator_regime"]["training"]
        assert training["lora_targets"] == ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj",
                                            "down_proj"]
        assert training["lora_dropout"] == 0.05
        again = plan_estimate(Plan.from_dict(data))
        assert again.per_gpu.total == data["per_gpu_total_bytes"]
        assert {k: getattr(again.per_gpu, k) for k in data["memory_breakdown_bytes"]} == \
            data["memory_breakdown_bytes"]
    old = stored(plans[0])
    old["estimator_regime"] = {**old["estimator_regime"], "version": 3}
    for key in ("lora_targets", "lora_dropout"):
        old["estimator_regime"]["training"].pop(key)
    older = Plan.from_dict(old)
    assert older.from_older_model
    assert plan_estimate(older).per_gpu.total != old["per_gpu_total_bytes"]


def test_a_plan_whose_adapters_named_the_head_before_version_9_is_marked_older_and_now_counts_them(catalog):
    """Up to version 8 an lm_head in lora_targets was left out without a word; a stored plan of
    version 8 naming it is marked as from an older model and re-estimates with the head's adapter,
    its saved input and rank-r middle: more bytes than it stored."""
    plan = plans_for("llama-3.1-8b", catalog, finetune="lora")[0]
    data = stored(plan)
    training = data["estimator_regime"]["training"]
    head = {**training, "lora_targets": [*training["lora_targets"], "lm_head"]}
    data["estimator_regime"] = {**data["estimator_regime"], "version": 8, "training": head}
    older = Plan.from_dict(data)
    assert older.from_older_model
    again = plan_estimate(older).per_gpu
    assert again.activations > data["memory_breakdown_bytes"]["activations"]
    assert again.gradients > data["memory_breakdown_bytes"]["gradients"]


def test_a_stored_regimes_lora_targets_must_be_layer_names(catalog):
    data = stored(plans_for("llama-3.1-8b", catalog, finetune="lora")[0])
    data["estimator_regime"]["training"]["lora_targets"] = "q_proj"
    with pytest.raises(ValueError, match="lora_targets must be a list of layer names"):
        Plan.from_dict(data)
