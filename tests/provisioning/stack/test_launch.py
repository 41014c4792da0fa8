"""launch.sh, run for real under bash with stand-in launchers in the venv that print what they
were asked: ``launch.sh SCRIPT`` is torchrun on every stack (the acceptance job needs that), and
``launch.sh --stack`` starts the ordered stack the way it needs (Accelerate reads its config,
which names deepspeed.json for DeepSpeed; torchtitan's trainer gets its job config)."""

from __future__ import annotations

import subprocess

import pytest

from provisioning.stack.bundle import render_stack
from tests.provisioning.stack.variants import CLUSTER, IB_FACTS, node, order

ECHO = '#!/usr/bin/env bash\necho "$(basename "$0") $*"\n'


def launch(tmp_path, strategy: str, *args: str, cluster=False, env=None):
    nodes = CLUSTER if cluster else [node(1)]
    stack = render_stack(order=order(strategy, network=("infiniband", 400)), node=nodes[-1],
                         nodes=nodes, facts=IB_FACTS if cluster else None)
    etc = tmp_path / "etc" / "trainyard"
    etc.mkdir(parents=True)
    for name in ("env.sh", "launch.sh"):
        (etc / name).write_text(stack.file(name).content)
    bin_dir = tmp_path / "opt" / "trainyard" / "venv" / "bin"
    bin_dir.mkdir(parents=True)
    for tool in ("torchrun", "accelerate"):
        (bin_dir / tool).write_text(ECHO)
        (bin_dir / tool).chmod(0o755)
    done = subprocess.run(["bash", str(etc / "launch.sh"), *args], capture_output=True, text=True,
                          env={"PATH": "/usr/bin:/bin", **(env or {})})
    return done.returncode, done.stdout.strip(), str(tmp_path)


@pytest.mark.parametrize("strategy", ["ddp", "fsdp", "deepspeed", "torchtitan"])
def test_a_plain_script_runs_under_torchrun_on_every_stack(tmp_path, strategy):
    status, out, _ = launch(tmp_path, strategy, "train_smoke.py", "--steps", "30")
    assert status == 0
    assert out == "torchrun --standalone --nnodes=1 --nproc-per-node=8 train_smoke.py --steps 30"


@pytest.mark.parametrize("strategy", ["fsdp", "deepspeed"])
def test_the_stack_way_of_accelerate_stacks_reads_the_accelerate_config(tmp_path, strategy):
    status, out, root = launch(tmp_path, strategy, "--stack", "train.py", "--lr", "1e-4",
                               cluster=True)
    assert status == 0
    assert out == f"accelerate launch --config_file {root}/etc/trainyard/accelerate.yaml train.py --lr 1e-4"
    status, out, _ = launch(tmp_path / "c10d", strategy, "--stack", "train.py", cluster=True,
                            env={"TRAINYARD_RDZV": "c10d"})
    assert status == 0 and "--rdzv_backend c10d train.py" in out


def test_the_stack_way_of_torchtitan_runs_its_trainer_with_the_job_config(tmp_path):
    status, out, root = launch(tmp_path, "torchtitan", "--stack", "--training.steps", "10",
                               cluster=True)
    assert status == 0
    assert out == ("torchrun --nnodes=2 --node-rank=1 --master-addr=10.20.0.1 --master-port=29500 "
                   f"--nproc-per-node=8 -m torchtitan.train --job.config_file "
                   f"{root}/etc/trainyard/torchtitan.toml --training.steps 10")


def test_ddp_has_one_way_and_bad_usage_says_how(tmp_path):
    status, out, _ = launch(tmp_path, "ddp", "--stack", "train.py")
    assert status == 0 and out.startswith("torchrun --standalone") and out.endswith(" train.py")
    status, _, _ = launch(tmp_path / "none", "fsdp")
    assert status == 2
