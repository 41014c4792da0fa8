"""What the renderer checks before it renders: the stack can run the plan (capabilities again),
torchtitan builds exactly the plan's model, the batch and the steps come from one place and
tp·pp·cp divides the world, context parallelism has one key, and checkpointing, LoRA and QLoRA
mean in the configs what they mean in the estimate."""

from __future__ import annotations

import json
import tomllib

import pytest
import yaml

from provisioning.stack.bundle import render_stack
from tests.provisioning.stack.variants import CLUSTER, IB_FACTS, L4, node, order


def render(strategy: str, plan: dict, *, cluster: bool = False, sku=None):
    kwargs = {"sku": sku} if sku else {}
    if cluster:
        return render_stack(order=order(strategy, plan=plan, network=("infiniband", 400), **kwargs),
                            node=CLUSTER[0], nodes=CLUSTER, facts=IB_FACTS)
    return render_stack(order=order(strategy, plan=plan, **kwargs), node=node(1), nodes=[node(1)])


def titan(plan: dict, **kw) -> dict:
    return tomllib.loads(render("torchtitan", plan, **kw).file("torchtitan.toml").content)


# --- the stack check, again at render time -------------------------------------------------------
@pytest.mark.parametrize("strategy, plan, lacking", [
    ("ddp", {"tp": 4, "pp": 2}, "tensor parallelism 4, pipeline parallelism 2"),
    ("deepspeed", {"sharding": "zero3", "tp": 2}, "tensor parallelism 2"),
    ("fsdp", {"checkpointing": "selective-op"}, "op-level selective activation checkpointing"),
    ("torchtitan", {"finetune": "qlora"}, "QLoRA"),
    ("torchtitan", {"model": "mistral-7b"}, "model family Mistral"),
])
def test_a_plan_the_stack_cannot_run_is_refused_not_rendered(strategy, plan, lacking):
    with pytest.raises(ValueError, match="cannot run .*of this order's plan") as caught:
        render(strategy, plan, cluster=True)
    assert lacking in str(caught.value)


@pytest.mark.parametrize("model, flavour", [("llama-3.1-8b", "8B"), ("llama-3.1-70b", "70B"),
                                            ("llama-3.1-405b", "405B")])
def test_torchtitan_builds_the_flavour_of_the_models_own_architecture(model, flavour):
    data = titan({"model": model}, cluster=True)
    assert (data["model"]["name"], data["model"]["flavor"]) == ("llama3", flavour)


@pytest.mark.parametrize("model", ["mistral-7b", "qwen2.5-72b", "mixtral-8x7b", "llama-2-70b",
                                   "llama-2-7b"])
def test_torchtitan_refuses_every_model_it_has_no_definition_for(model):
    """Before, each of these rendered name="llama3" at a flavour picked from the size in its name."""
    with pytest.raises(ValueError, match="cannot run model family"):
        render("torchtitan", {"model": model}, cluster=True)


def test_a_llama3_shaped_spec_under_another_name_is_built_and_a_near_miss_is_refused():
    spec = {"family": "llama", "vocab_size": 128256, "hidden_size": 4096, "num_layers": 32,
            "num_heads": 32, "num_kv_heads": 8, "intermediate_size": 14336}
    assert titan({"model": "my-llama", "model_spec": spec})["model"]["flavor"] == "8B"
    with pytest.raises(ValueError, match="Llama-architecture"):
        render("torchtitan", {"model": "my-llama", "model_spec": {**spec, "num_layers": 30}})


# --- batch and steps from one place ---------------------------------------------------------------
def test_the_steps_train_the_plans_tokens_with_the_rendered_batch():
    """A partial plan without grad_accum: the accumulation that makes its global batch."""
    plan = {"model": "llama-3.1-8b", "micro_batch": 2, "seq_len": 4096,
            "global_batch_tokens": 4 * 2**20, "train_tokens": 10**10}
    data = titan(plan, cluster=True)  # 16 GPUs, dp 16: 2 × 16 × 4096 = 131072 tokens per accum
    assert data["training"]["global_batch_size"] == 1024 and data["training"]["local_batch_size"] == 2
    tokens = data["training"]["global_batch_size"] * data["training"]["seq_len"]
    assert tokens == 4 * 2**20 and data["training"]["steps"] == -(-10**10 // tokens)
    env = render("fsdp", plan, cluster=True).file("env.sh").content
    assert "export TRAINYARD_GRAD_ACCUM=32\n" in env and "export WORLD_SIZE=16\n" in env


def test_a_plan_whose_batch_numbers_disagree_is_refused_with_them():
    plan = {"micro_batch": 1, "grad_accum": 4, "tp": 4, "pp": 2, "cp": 2, "seq_len": 8192,
            "global_batch_tokens": 4_194_304, "train_tokens": 2 * 10**12}
    with pytest.raises(ValueError, match=r"global_batch_tokens 4,194,304 is not micro_batch 1 x "
                                         r"grad_accum 4 x data-parallel 1 x seq_len 8192 = 32,768"):
        render("torchtitan", plan, cluster=True)


@pytest.mark.parametrize("plan", [{"tp": 8, "pp": 2, "cp": 1}, {"tp": 4, "pp": 1, "cp": 3}])
def test_tp_pp_cp_must_divide_the_world(plan):
    with pytest.raises(ValueError, match="does not divide the order's 8 GPU"):
        render("torchtitan", plan)


def test_context_parallelism_is_read_from_the_top_level_only():
    assert titan({"cp": 2}, cluster=True)["parallelism"]["context_parallel_degree"] == 2
    # stack_settings are display values: read by neither the stack check nor the renderer
    assert titan({"stack_settings": {"cp": 2}}, cluster=True)["parallelism"][
        "context_parallel_degree"] == 1


# --- checkpointing, LoRA, QLoRA ------------------------------------------------------------------
@pytest.mark.parametrize("policy, attention, accelerate, titan_ac", [
    ("none", "sdpa", False, {"mode": "none"}),
    # Accelerate: SDPA keeps no attention scores to drop; torchtitan: its selective is op-level
    # SAC, the policy the recommender estimates for it (portal/sizing/recommend/regimes.py)
    ("selective", "sdpa", False, {"mode": "selective", "selective_ac_option": "op"}),
    # no HF stack has Korthikanti's policy: whole layers
    ("selective", "eager", True, {"mode": "selective", "selective_ac_option": "op"}),
    ("full", "sdpa", True, {"mode": "full"}),
    ("selective-op", "sdpa", None, {"mode": "selective", "selective_ac_option": "op"}),
])
def test_checkpointing_means_in_the_configs_what_it_means_in_the_estimate(policy, attention,
                                                                         accelerate, titan_ac):
    plan = {"checkpointing": policy, "attention": attention}
    if accelerate is not None:
        data = yaml.safe_load(render("fsdp", plan).file("accelerate.yaml").content)
        assert data["fsdp_config"]["fsdp_activation_checkpointing"] is accelerate
    if titan_ac is not None:
        assert titan(plan)["activation_checkpoint"] == titan_ac


@pytest.mark.parametrize("strategy, sharding, storage", [
    ("fsdp", "fsdp-full-shard", "bfloat16"), ("deepspeed", "zero3", "bfloat16"),
    ("deepspeed", "zero2", None), ("ddp", "none", None)])
def test_qlora_renders_its_four_bit_base_and_adapters(strategy, sharding, storage):
    from transformers import BitsAndBytesConfig

    stack = render(strategy, {"model": "llama-3.1-70b", "finetune": "qlora", "lora_rank": 32,
                              "sharding": sharding})
    data = json.loads(stack.file("adapters.json").content)
    assert data["lora"]["r"] == 32 and "q_proj" in data["lora"]["target_modules"]
    quantization = data["quantization"]
    import inspect
    assert set(quantization) <= set(inspect.signature(BitsAndBytesConfig.__init__).parameters)
    config = BitsAndBytesConfig(**quantization)
    assert config.load_in_4bit and config.bnb_4bit_quant_type == "nf4"
    assert quantization.get("bnb_4bit_quant_storage") == storage  # FSDP / ZeRO-3 shard it


def test_lora_renders_adapters_without_quantization_and_a_full_plan_renders_none():
    lora = json.loads(render("fsdp", {"finetune": "lora"}).file("adapters.json").content)
    assert lora["lora"]["r"] == 16 and "quantization" not in lora
    assert render("fsdp", {"finetune": "full"}).file("adapters.json") is None


def test_a_test_host_installs_no_constraints_and_a_gpu_node_pins_what_it_pulls_in():
    gpu = render("fsdp", {})
    assert "transformers==5.24.0" not in gpu.file("constraints.txt").content  # direct pins elsewhere
    assert "huggingface-hub==" in gpu.file("constraints.txt").content
    test_host = render_stack(order=order("fsdp", sku=L4), node=node(1, test_host=True),
                             nodes=[node(1, test_host=True)])
    assert test_host.file("constraints.txt") is None


# --- fabric discovery: InfiniBand ports only -------------------------------------------------------
def test_discovery_lists_every_infiniband_port_and_leaves_ethernet_ports_out(tmp_path):
    """A ConnectX card with one port in Ethernet mode (RoCE): before, any ACTIVE port went into
    NCCL_IB_HCA. A down InfiniBand port is listed: the preflight fails naming it."""
    import subprocess

    from provisioning.stack.discover import discover_env, discover_script, parse_facts

    for hca, layer, state in (("mlx5_0", "InfiniBand", "4: ACTIVE"), ("mlx5_1", "Ethernet", "4: ACTIVE"),
                              ("mlx5_2", "InfiniBand", "1: DOWN")):
        port = tmp_path / "sys/class/infiniband" / hca / "ports" / "1"
        port.mkdir(parents=True)
        (port / "link_layer").write_text(layer + "\n")
        (port / "state").write_text(state + "\n")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "ip").write_text(  # `ip -o addr show`: this node's fabric address is on ib0
        "#!/bin/sh\necho '3: ib0    inet 10.20.0.2/24 brd 10.20.0.255 scope global ib0'\n")
    (bin_dir / "ip").chmod(0o755)
    stack = render("ddp", {}, cluster=True)
    inputs = render_stack(order=order("ddp", network=("infiniband", 400)), node=CLUSTER[1],
                          nodes=CLUSTER, facts=IB_FACTS).inputs
    done = subprocess.run(["bash", "-c", discover_script()], capture_output=True, text=True,
                          env={"PATH": f"{bin_dir}:/usr/bin:/bin",
                               "TRAINYARD_SYSFS": str(tmp_path / "sys"), **discover_env(inputs)})
    assert done.returncode == 0, done.stdout + done.stderr
    facts = parse_facts(done.stdout.splitlines())
    assert facts.socket_ifname == "ib0" and facts.ib_hcas == ("mlx5_0:1", "mlx5_2:1")
    assert "GLOO_SOCKET_IFNAME=ib0" in stack.file("env.sh").content
