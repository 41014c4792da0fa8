"""``launch.sh`` (``sh/launch.sh``, the order's stack and layout in its header): how to start
training on this node, the plain way and the ordered stack's way.

    launch.sh SCRIPT [ARGS...]          torchrun over the node's GPUs (any stack; a plain
    launch.sh -m MODULE [ARGS...]       PyTorch script: DDP, FSDP2 by hand, the acceptance job)
    launch.sh --stack [SCRIPT] [ARGS]   the way the ordered stack needs:
        ddp         the same torchrun
        fsdp        accelerate launch --config_file /etc/trainyard/accelerate.yaml SCRIPT
        deepspeed   accelerate launch --config_file /etc/trainyard/accelerate.yaml SCRIPT
                    (that file names deepspeed.json as Accelerate's deepspeed_config_file)
        torchtitan  torchrun ... -m torchtitan.train --job.config_file
                    /etc/trainyard/torchtitan.toml [ARGS: overrides, e.g. --training.steps 10]

It sources ``env.sh`` next to it. torchrun: one node ``--standalone``; a cluster with static
rendezvous (``--node-rank``, ``--master-addr``) by default, or c10d (``--rdzv-backend=c10d``, any
node may join in any order) with ``TRAINYARD_RDZV=c10d``; Accelerate reads the same from its
config (``--rdzv_backend c10d`` with ``TRAINYARD_RDZV=c10d``). Exit 2: bad usage; 3: a launcher
is not installed (run bootstrap.sh first; a CPU test host installs torch only).
"""

from __future__ import annotations

from provisioning.stack.inputs import StackInputs
from provisioning.stack.shell import node_script

STACK_USAGE = {"ddp": "SCRIPT [ARGS...]", "fsdp": "SCRIPT [ARGS...]",
               "deepspeed": "SCRIPT [ARGS...]", "torchtitan": "[OVERRIDES...]"}
def stack_command(strategy: str) -> str:
    """What the server page and docs tell the customer to run to train with the ordered stack."""
    return f"/etc/trainyard/launch.sh --stack {'' if strategy == 'torchtitan' else 'train.py'}".strip()


def render_launch(inputs: StackInputs) -> str:
    """``sh/launch.sh`` with the ordered stack and the layout in its header."""
    return node_script("launch", values={
        "TRAINYARD_LAUNCH_STACK": inputs.strategy,
        "TRAINYARD_LAUNCH_USAGE": STACK_USAGE[inputs.strategy],
        "TRAINYARD_LAUNCH_CLUSTER": "1" if inputs.cluster else "0"})
