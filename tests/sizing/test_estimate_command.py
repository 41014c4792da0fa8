"""python manage.py estimate"""

import json
from decimal import Decimal
from io import StringIO

import pytest
from django.core.management import CommandError, call_command

FLAGS = ["--model", "llama-3.1-8b", "--precision", "bf16-mixed", "--optimizer", "adamw",
         "--micro-batch", "1", "--seq-len", "8192", "--sharding", "fsdp-full-shard", "--dp", "8"]


def _run(*args) -> str:
    out = StringIO()
    call_command("estimate", *args, stdout=out)
    return out.getvalue()


def test_json_has_the_documented_keys():
    data = json.loads(_run(*FLAGS, "--json"))
    assert set(data["per_gpu_bytes"]) >= {"weights", "gradients", "optimizer_states",
                                          "activations", "logits_and_loss", "gathered_buffers",
                                          "framework_overhead", "total"}
    assert data["params"]["total"] == 8030261248
    assert data["per_gpu_bytes"]["total"] == sum(
        v for k, v in data["per_gpu_bytes"].items() if k != "total")


def test_table_output_and_model_list():
    assert "optimizer_states" in _run(*FLAGS)
    assert "mixtral-8x7b" in _run("--list-models")


def test_bad_input_is_a_command_error():
    with pytest.raises(CommandError, match="tp=3 does not divide 32 attention heads"):
        _run("--model", "llama-2-7b", "--tp", "3")
    with pytest.raises(CommandError, match="unknown model preset"):
        _run("--model", "nope")


def _h100_in_catalog() -> None:
    from portal.catalog.models import GPUModel

    GPUModel.objects.update_or_create(slug="h100-test-80gb", defaults=dict(
        name="H100 test", arch="Hopper", form_factor="SXM5", memory_gb=Decimal("80"),
        memory_type="HBM3", memory_bandwidth_gbps=3350, fp32_tflops=Decimal("67"),
        bf16_tflops=Decimal("989.4"), fp8_tflops=Decimal("1979"), nvlink_gbps=900, pcie_gen=5,
        tdp_w=700))


@pytest.mark.django_db
def test_gpu_from_the_catalog_adds_compute():
    _h100_in_catalog()
    data = json.loads(_run(*FLAGS, "--gpu", "h100-test-80gb", "--train-tokens", "1e11", "--json"))
    assert data["fits"] in (True, False)
    assert data["compute"]["step_seconds"] > 0
    assert data["compute"]["time_to_train_seconds"] > 0
    with pytest.raises(CommandError, match="unknown GPU"):
        _run(*FLAGS, "--gpu", "no-such-gpu")


def test_a_parameter_count_too_large_is_a_clear_error():
    from django.core.management import CommandError, call_command

    with pytest.raises(CommandError, match="too large"):
        call_command("estimate", "--params", "1e400", "--layers", "2", "--hidden", "64",
                     "--heads", "4", "--vocab", "100")


def test_json_says_what_the_estimate_represents_and_what_it_cannot():
    data = json.loads(_run("--model", "llama-2-7b", "--finetune", "qlora", "--sharding", "zero3", "--dp", "4",
                           "--quant-storage", "uint8", "--json"))
    assert data["unmodelled"] == ["QLoRA's NF4 weights in uint8 storage under ZeRO-3 (store them in the half"
                                  " dtype: quant_storage)"]
    assert "sharding=zero3" in data["represents"]
    titan = json.loads(_run(*FLAGS, "--mixed-layout", "fsdp2", "--compile", "--compile-loss",
                            "--checkpointing", "selective-op", "--json"))
    assert titan["unmodelled"] == [] and "layout=fsdp2" in titan["represents"]
    assert "checkpointing=selective-op" in titan["represents"]
    table = _run("--model", "llama-2-7b", "--finetune", "qlora", "--sharding", "zero3", "--dp", "4",
                 "--quant-storage", "uint8")
    assert "unmodelled: [QLoRA's NF4 weights in uint8 storage under ZeRO-3" in table
    half = json.loads(_run("--model", "llama-2-7b", "--finetune", "qlora", "--sharding", "zero3", "--dp", "4",
                           "--json"))  # auto: the half type under ZeRO-3
    assert half["unmodelled"] == [] and "quant_storage=bf16" in half["represents"]


def test_plain_nf4_is_a_flag_and_adds_its_fp32_absmax():
    qlora = ("--model", "llama-2-7b", "--finetune", "qlora", "--precision", "bf16", "--json")
    double, plain = json.loads(_run(*qlora)), json.loads(_run(*qlora, "--no-double-quant"))
    assert "nf4 without double quantisation (fp32 absmax)" in plain["represents"]
    assert not any("double" in k for k in double["represents"])
    assert plain["per_gpu_bytes"]["weights"] > double["per_gpu_bytes"]["weights"]
    with pytest.raises(CommandError, match="plain NF4: it needs finetune='qlora'"):
        _run("--model", "llama-2-7b", "--no-double-quant")


def test_lightnings_quantizer_is_a_flag_that_makes_the_head_4bit():
    qlora = ("--model", "llama-3.1-8b", "--finetune", "qlora", "--precision", "bf16", "--json")
    hf, lightning = json.loads(_run(*qlora)), json.loads(_run(*qlora, "--nf4-quantizer", "lightning"))
    assert "nf4_quantizer=lightning" in lightning["represents"]
    assert lightning["per_gpu_bytes"]["weights"] < hf["per_gpu_bytes"]["weights"]
    with pytest.raises(CommandError, match="on one GPU without offload"):
        _run(*qlora, "--nf4-quantizer", "lightning", "--dp", "2")


@pytest.mark.django_db
def test_the_attention_kernel_sets_attention_time_on_hopper():
    """FlashAttention-2 (the default kernel) runs a long sequence's attention slower on an H100
    than FlashAttention-3 does; an unknown kernel is refused by the flag."""
    _h100_in_catalog()

    def step(*kernel):
        data = json.loads(_run(*FLAGS, "--attention", "flash", "--checkpointing", "full", "--gpu",
                               "h100-test-80gb", *kernel, "--json"))
        return data["compute"]["step_seconds"]

    assert step() == step("--attention-kernel", "fa2") > step("--attention-kernel", "fa3")
    with pytest.raises(CommandError, match="attention-kernel"):
        _run(*FLAGS, "--attention-kernel", "fa4")


def test_lora_dropout_adds_each_adapters_dropped_copy():
    lora = [*FLAGS, "--finetune", "lora", "--lora-targets", "q_proj,v_proj", "--json"]
    plain = json.loads(_run(*lora))
    dropped = json.loads(_run(*lora, "--lora-dropout", "0.1"))
    assert dropped["per_gpu_bytes"]["activations"] > plain["per_gpu_bytes"]["activations"]
    assert "finetune=lora r=16 lora_dropout=0.1" in dropped["represents"]
    with pytest.raises(CommandError, match="lora_dropout must be in"):
        _run(*lora, "--lora-dropout", "1.5")


def test_dora_keeps_each_adapted_linears_outputs_and_is_named():
    lora = [*FLAGS, "--finetune", "lora", "--lora-targets", "q_proj,v_proj", "--json"]
    plain = json.loads(_run(*lora))
    dora = json.loads(_run(*lora, "--dora"))
    assert dora["per_gpu_bytes"]["activations"] > plain["per_gpu_bytes"]["activations"]
    assert dora["params"]["trainable"] > plain["params"]["trainable"]  # the magnitude vectors
    assert "finetune=lora r=16 DoRA" in dora["represents"]
    with pytest.raises(CommandError, match="use_dora is PEFT's DoRA on LoRA adapters"):
        _run(*FLAGS, "--finetune", "qlora", "--dora", "--json")


def test_a_paged_optimizers_states_outside_the_allocator_are_shown():
    """bitsandbytes pages the states of tensors of 1e5 elements or more (LoRA r=32 on q_proj of
    Llama 2 7B: 131,072): the JSON and the table say how much of the total lies outside
    PyTorch's allocator; a plain AdamW has none."""
    lora = ("--model", "llama-2-7b", "--finetune", "lora", "--lora-rank", "32", "--lora-targets", "q_proj",
            "--precision", "bf16")
    paged = json.loads(_run(*lora, "--optimizer", "adamw-paged", "--json"))
    plain = json.loads(_run(*lora, "--json"))
    assert paged["outside_allocator_bytes"] == paged["per_gpu_bytes"]["optimizer_states"] > 0
    assert plain["outside_allocator_bytes"] == 0
    assert "of which paged" in _run(*lora, "--optimizer", "adamw-paged")
    assert "of which paged" not in _run(*lora)
