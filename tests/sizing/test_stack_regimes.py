"""The regime table of the pure recommender (portal/sizing/recommend/regimes.py) against what the
stack renderers actually write (provisioning/stack/*.py): the two must not drift apart."""

import pytest

from portal.sizing.estimator import get_preset
from portal.sizing.recommend.regimes import REGIMES
from portal.sizing.recommend.stacks import preset_spec
from provisioning.stack.accelerate import accelerate_config
from provisioning.stack.deepspeed import deepspeed_config
from provisioning.stack.inputs import stack_inputs
from provisioning.stack.torchtitan import torchtitan_config
from tests.provisioning.stack.variants import CLUSTER, node, order

LLAMA = get_preset("llama-3.1-8b")


def inputs(strategy: str, **plan):
    base = {"model": "llama-3.1-8b", "model_spec": preset_spec("llama-3.1-8b"),
            "precision": "bf16-mixed", "seq_len": 8192, "micro_batch": 1, "grad_accum": 2}
    return stack_inputs(order=order(strategy, plan=base | plan), node=node(1), nodes=[node(1)])


def test_torchtitan_compiles_the_model_and_the_loss_in_fsdp2_mixed_precision():
    config = torchtitan_config(inputs("torchtitan", sharding="fsdp-full-shard", checkpointing="selective"))
    regime = REGIMES["torchtitan"]
    assert config["compile"]["enable"] and set(config["compile"]["components"]) == {"model", "loss"}
    assert (regime.compile, regime.compile_loss) == (True, True)
    # bf16 parameters, reduce_dtype left at torchtitan's default (float32): the fsdp2 layout
    assert config["training"]["mixed_precision_param"] == "bfloat16"
    assert "mixed_precision_reduce" not in config["training"]
    assert (regime.fsdp_layout, regime.fsdp_reduce_dtype) == ("fsdp2", "fp32")
    # selective = op-level SAC
    assert config["activation_checkpoint"] == {"mode": "selective", "selective_ac_option": "op"}
    assert regime.policy("selective", LLAMA) == "selective-op"
    # "default" resharding: torchtitan reshards after forward unless pipelining
    assert config["parallelism"]["fsdp_reshard_after_forward"] == "default"
    assert regime.reshard_with_pp is False
    assert regime.parallel_knobs(sharding="fsdp-full-shard", tp=1, pp=2, dp=4, nodes=1, model=LLAMA) == {
        "reshard_after_forward": False}


def test_torchtitan_pipelines_in_1f1b_with_sequence_parallel_tp_and_tensorwise_fp8_all_gather():
    config = torchtitan_config(inputs("torchtitan", sharding="fsdp-full-shard", checkpointing="full", tp=2,
                                      pp=2, precision="fp8"))
    regime = REGIMES["torchtitan"]
    assert config["parallelism"]["pipeline_parallel_schedule"] == "1F1B" and regime.pp_schedule == "1f1b"
    float8 = config["quantize"]["linear"]["float8"]
    assert float8["enable_fsdp_float8_all_gather"] and "recipe_name" not in float8  # tensorwise default
    assert regime.training_knobs("full", LLAMA, "sdpa", "fp8")["float8_all_gather"] is True
    # torchtitan's TP plan shards the norms' activations (SequenceParallel) whenever TP is on
    assert regime.parallel_knobs(sharding="fsdp-full-shard", tp=2, pp=1, dp=4, nodes=1, model=LLAMA)["sp"]
    assert config["model"]["name"] == "llama3" and regime.dense_llama_only


def test_hybrid_sharding_replicates_across_nodes_in_both_fsdp_stacks():
    titan = torchtitan_config(stack_inputs(order=order("torchtitan", plan={"sharding": "fsdp-hybrid"}),
                                           node=CLUSTER[0], nodes=CLUSTER))
    assert titan["parallelism"]["data_parallel_replicate_degree"] == 2  # nodes
    accel = accelerate_config(stack_inputs(order=order("fsdp", plan={"sharding": "fsdp-hybrid"}),
                                           node=CLUSTER[0], nodes=CLUSTER))
    assert accel["parallelism_config"]["parallelism_config_dp_shard_size"] == 8  # a node's GPUs
    for slug in ("fsdp", "torchtitan"):
        knobs = REGIMES[slug].parallel_knobs(sharding="fsdp-hybrid", tp=1, pp=1, dp=16, nodes=2, model=LLAMA)
        assert knobs["hybrid_shard_size"] == 8


def test_accelerate_runs_fsdp2_in_bf16_with_whole_layer_checkpointing_only():
    config = accelerate_config(inputs("fsdp", sharding="fsdp-full-shard", checkpointing="full"))
    regime = REGIMES["fsdp"]
    # Accelerate's FSDP2 mixed_precision "bf16": MixedPrecisionPolicy(param_dtype=bf16, reduce_dtype=bf16)
    assert config["mixed_precision"] == "bf16" and config["fsdp_config"]["fsdp_version"] == 2
    assert (regime.fsdp_layout, regime.fsdp_reduce_dtype, regime.compile) == ("fsdp2", "bf16", False)
    # activation checkpointing is on or off: "selective" would render the same as "full"
    assert isinstance(config["fsdp_config"]["fsdp_activation_checkpointing"], bool)
    assert dict(regime.checkpointing) == {"none": "none", "full": "full"}
    assert "dynamo_config" not in config  # not compiled


def test_deepspeed_buckets_are_the_ones_the_renderer_writes():
    h = 4096
    for stage, sharding in ((2, "zero2"), (3, "zero3")):
        zero = deepspeed_config(inputs("deepspeed", sharding=sharding))["zero_optimization"]
        assert zero["stage"] == stage
        knobs = REGIMES["deepspeed"].parallel_knobs(sharding=sharding, tp=1, pp=1, dp=8, nodes=1, model=LLAMA)
        z = knobs["zero"]
        rendered = (zero["reduce_bucket_size"], zero["overlap_comm"], zero["contiguous_gradients"])
        ours = (z.reduce_bucket_size, z.overlap_comm, z.contiguous_gradients)
        assert ours == rendered == (h * h, True, True)
        if stage == 3:
            assert z.prefetch_bucket_size == zero["stage3_prefetch_bucket_size"] == int(0.9 * h * h)
            assert z.param_persistence_threshold == zero["stage3_param_persistence_threshold"] == 10 * h
            assert "stage3_max_live_parameters" not in zero and z.max_live_parameters == 1_000_000_000
    config = deepspeed_config(inputs("deepspeed", sharding="zero1"))
    assert "data_types" not in config  # grad_accum_dtype: the model dtype (no BF16_Optimizer)
    z = REGIMES["deepspeed"].parallel_knobs(sharding="zero1", tp=1, pp=1, dp=8, nodes=1, model=LLAMA)["zero"]
    assert z.grad_accum_dtype is None


def test_a_bf16_plan_is_sized_as_the_bf16_mixed_precision_every_stack_renders():
    """Every stack renders bf16 as bf16 compute over fp32 weights and optimizer states
    (Accelerate bf16, DeepSpeed bf16.enabled, torchtitan mixed_precision_param bfloat16): a
    "bf16" plan is sized so, never as pure-bf16 states; torchtitan takes no fp16-mixed plan
    (its config would train in fp32)."""
    assert accelerate_config(inputs("fsdp", precision="bf16"))["mixed_precision"] == "bf16"
    assert deepspeed_config(inputs("deepspeed", sharding="zero3", precision="bf16"))["bf16"]["enabled"]
    assert torchtitan_config(inputs("torchtitan", precision="bf16"))["training"][
        "mixed_precision_param"] == "bfloat16"
    for slug in ("ddp", "fsdp", "deepspeed", "torchtitan"):
        assert REGIMES[slug].precision("bf16") == "bf16-mixed"
        assert REGIMES[slug].training_knobs("none", LLAMA, "sdpa", "bf16")["precision"] == "bf16-mixed"
    assert REGIMES["fsdp"].layout_knobs("fsdp-full-shard", "bf16") == {"mixed_layout": "fsdp2"}
    assert not REGIMES["torchtitan"].runs(LLAMA, "fp16-mixed") and REGIMES["fsdp"].runs(LLAMA, "fp16-mixed")


def test_qlora_with_sharded_weights_is_sized_with_the_half_quant_storage_the_stacks_render():
    """adapters.json stores the 4-bit weights in the half type when the parameters are sharded, so
    FSDP and ZeRO-3 shard them; every stack's regime sizes such a plan with that quant_storage."""
    from provisioning.stack.adapters import adapters_config

    for strategy, sharding in (("fsdp", "fsdp-full-shard"), ("fsdp", "fsdp-hybrid"), ("deepspeed", "zero3")):
        rendered = adapters_config(inputs(strategy, sharding=sharding, finetune="qlora", lora_rank=16))
        assert rendered["quantization"]["bnb_4bit_quant_storage"] == "bfloat16"
        assert REGIMES[strategy].layout_knobs(sharding, "bf16-mixed", "qlora")["quant_storage"] == "bf16"
    rendered = adapters_config(inputs("deepspeed", sharding="zero2", finetune="qlora", lora_rank=16))
    assert "bnb_4bit_quant_storage" not in rendered["quantization"]  # not sharded: bitsandbytes' uint8
    assert "quant_storage" not in REGIMES["deepspeed"].layout_knobs("zero2", "bf16-mixed", "qlora")
    assert "quant_storage" not in REGIMES["fsdp"].layout_knobs("fsdp-full-shard", "bf16-mixed", "lora")


def test_lora_plans_are_sized_with_the_adapters_every_stack_renders():
    """adapters.json adapts every linear of the attention and MLP blocks with LoRA dropout 0.05 on
    every stack; the regime restates both (the dropout copies are saved per adapter)."""
    from provisioning.stack.adapters import adapters_config

    for strategy, sharding in (("ddp", "none"), ("fsdp", "fsdp-full-shard"), ("deepspeed", "zero3")):
        for finetune in ("lora", "qlora"):
            rendered = adapters_config(inputs(strategy, sharding=sharding, finetune=finetune, lora_rank=16))
            knobs = REGIMES[strategy].adapter_knobs(LLAMA, finetune)
            assert knobs == {"lora_targets": tuple(rendered["lora"]["target_modules"]),
                             "lora_dropout": rendered["lora"]["lora_dropout"]}
        assert REGIMES[strategy].adapter_knobs(LLAMA, "full") == {}


def test_the_adapters_deployed_are_the_ones_the_plan_was_sized_with():
    """adapters.json takes the plan's own targets and dropout (its estimator_regime), the output
    head too, and PEFT's all-linear shorthand as a string; a malformed regime is a clear error."""
    from provisioning.stack.adapters import adapters_config

    sized = {"estimator_regime": {"version": 9, "training": {"lora_targets": ["q_proj", "v_proj", "lm_head"],
                                                             "lora_dropout": 0.1}}}
    lora = adapters_config(inputs("fsdp", sharding="fsdp-full-shard", finetune="lora", **sized))["lora"]
    assert (lora["target_modules"], lora["lora_dropout"]) == (["q_proj", "v_proj", "lm_head"], 0.1)
    shorthand = {"estimator_regime": {"training": {"lora_targets": ["all-linear"]}}}
    lora = adapters_config(inputs("fsdp", sharding="fsdp-full-shard", finetune="lora", **shorthand))["lora"]
    assert (lora["target_modules"], lora["lora_dropout"]) == ("all-linear", 0.05)
    with pytest.raises(ValueError, match="lora_targets must be a list of layer names"):
        inputs("fsdp", finetune="lora", estimator_regime={"training": {"lora_targets": "q_proj"}})
    with pytest.raises(ValueError, match="lora_dropout must be a number"):
        inputs("fsdp", finetune="lora", estimator_regime={"training": {"lora_dropout": 1.5}})
    with pytest.raises(ValueError, match="lora_targets must be a list of layer names"):
        inputs("fsdp", finetune="lora", estimator_regime={"training": {"lora_targets": ["q_proj", ""]}})
    unset = {"estimator_regime": {"training": {"lora_targets": None, "lora_dropout": None}}}
    lora = adapters_config(inputs("fsdp", sharding="fsdp-full-shard", finetune="lora", **unset))["lora"]
    assert lora["lora_dropout"] == 0.05  # null is unset: the stack's defaults


def test_the_fsdp_stack_accumulates_inside_accelerates_no_sync_unless_parameters_are_offloaded():
    """The fsdp stack runs FSDP2 under the pinned Accelerate, whose accumulate() enters no_sync on
    every micro-batch but the last and, for FSDP2, turns the gradient sync off: the layouts carry
    fsdp_no_sync (not under CPU offload); the other stacks' loops reduce every micro-batch."""
    from provisioning.stack.packages import FALLBACK_PACKAGES

    assert "accelerate==1.15.0" in FALLBACK_PACKAGES["fsdp"]  # no_sync calls set_requires_gradient_sync
    assert accelerate_config(inputs("fsdp", sharding="fsdp-full-shard"))["fsdp_config"]["fsdp_version"] == 2
    fsdp = REGIMES["fsdp"]
    for sharding in ("fsdp-full-shard", "fsdp-shard-grad-op", "fsdp-hybrid"):
        knobs = fsdp.parallel_knobs(sharding=sharding, tp=1, pp=1, dp=8, nodes=1, model=LLAMA)
        assert knobs["fsdp_no_sync"] is True
    offloaded = fsdp.parallel_knobs(sharding="fsdp-full-shard", tp=1, pp=1, dp=8, nodes=1, model=LLAMA,
                                    offload="optimizer")
    assert "fsdp_no_sync" not in offloaded
    for slug in ("torchtitan", "deepspeed", "ddp"):
        knobs = REGIMES[slug].parallel_knobs(sharding="fsdp-full-shard", tp=1, pp=1, dp=8, nodes=1,
                                             model=LLAMA)
        assert "fsdp_no_sync" not in knobs
