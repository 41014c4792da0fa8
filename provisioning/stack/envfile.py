"""``env.sh`` (sourced by ``launch.sh`` and by the customer) and ``/etc/nccl.conf``.

``MASTER_ADDR`` is the first node's fabric address (a single node: 127.0.0.1);
``NCCL_SOCKET_IFNAME`` (and ``GLOO_SOCKET_IFNAME``, which gloo reads instead) and ``NCCL_IB_HCA``
are what the stack step discovered on this node.
No debug-only override (``NCCL_DEBUG``, ``NCCL_P2P_DISABLE``, ``TORCH_DISTRIBUTED_DEBUG`` …)
is ever written: those belong in a shell for one run, not in a file every run reads.
"""

from __future__ import annotations

import shlex

from provisioning.stack.inputs import CHECKPOINTS_KEPT, StackInputs
from provisioning.stack.paths import CHECKPOINT_DIR

CONFIG_FILES = {"fsdp": "accelerate.yaml", "deepspeed": "deepspeed.json",
                "torchtitan": "torchtitan.toml"}
LOOPBACK = "lo"


def socket_ifname(inputs: StackInputs) -> str:
    if not inputs.cluster:
        return LOOPBACK
    return inputs.facts.socket_ifname


def nccl_settings(inputs: StackInputs) -> list[tuple[str, str]]:
    pairs = []
    if ifname := socket_ifname(inputs):
        pairs.append(("NCCL_SOCKET_IFNAME", ifname))
    if inputs.cluster and inputs.infiniband and inputs.facts.ib_hcas:
        pairs.append(("NCCL_IB_HCA", ",".join(inputs.facts.ib_hcas)))
    return pairs


def _tracking(inputs: StackInputs) -> list[tuple[str, str]]:
    if inputs.tracker == "tensorboard":
        return [("TENSORBOARD_LOGDIR", "$TRAINYARD_DATA/tensorboard")]
    if inputs.tracker == "mlflow":
        return [("MLFLOW_TRACKING_URI", "file://$TRAINYARD_DATA/mlruns"),
                ("MLFLOW_EXPERIMENT_NAME", inputs.order)]
    if inputs.tracker == "wandb":
        # The API key is the customer's: `wandb login` or WANDB_API_KEY in their own shell.
        return [("WANDB_PROJECT", inputs.order), ("WANDB_DIR", "$TRAINYARD_DATA/wandb")]
    return []


def render_env(inputs: StackInputs) -> str:
    t = inputs.training
    fixed = [
        ("TRAINYARD_ORDER", inputs.order), ("TRAINYARD_NODE", inputs.hostname),
        ("TRAINYARD_STRATEGY", inputs.strategy), ("TRAINYARD_TRACKER", inputs.tracker),
        ("TRAINYARD_DIST_BACKEND", inputs.backend),
        ("MASTER_ADDR", inputs.master_addr), ("MASTER_PORT", str(inputs.master_port)),
        ("NNODES", str(inputs.nnodes)), ("NODE_RANK", str(inputs.node_rank)),
        ("NPROC_PER_NODE", str(inputs.nproc_per_node)), ("WORLD_SIZE", str(inputs.world_size)),
        ("TRAINYARD_MICRO_BATCH", str(t.micro_batch)), ("TRAINYARD_GRAD_ACCUM", str(t.grad_accum)),
        ("TRAINYARD_NUM_WORKERS", str(inputs.dataloader_workers)),
        ("TRAINYARD_PREFETCH_FACTOR", str(inputs.prefetch_factor)),
        # Save a checkpoint to $TRAINYARD_CHECKPOINT_DIR every this many optimizer steps (about
        # every 45 minutes of the plan's estimated training, at least 3 times in the run).
        ("TRAINYARD_CHECKPOINT_EVERY_STEPS", str(t.checkpoint_every_steps)),
        ("TRAINYARD_CHECKPOINT_KEEP", str(CHECKPOINTS_KEPT)),
    ]
    if inputs.strategy == "fsdp":
        fixed.append(("ACCELERATE_GRADIENT_ACCUMULATION_STEPS", str(t.grad_accum)))
    lines = [
        "# shellcheck shell=bash",
        f"# Trainyard environment of {inputs.hostname}: node {inputs.node_rank} of "
        f"{inputs.nnodes}, order {inputs.order}.",
        "# Rendered from the order's plan by the stack step; re-deploying the stack rewrites it.",
        "# Use: . /etc/trainyard/env.sh   (launch.sh sources it for you)",
        'export TRAINYARD_ROOT="${TRAINYARD_ROOT:-}"',
        'export TRAINYARD_ETC="$TRAINYARD_ROOT/etc/trainyard"',
        'export TRAINYARD_VENV="$TRAINYARD_ROOT/opt/trainyard/venv"',
        'export TRAINYARD_DATA="$TRAINYARD_ROOT/data"',
        f'export TRAINYARD_CHECKPOINT_DIR="$TRAINYARD_ROOT{CHECKPOINT_DIR}"',
    ]
    lines += [f"export {k}={shlex.quote(v)}" for k, v in fixed]
    if name := CONFIG_FILES.get(inputs.strategy):
        lines.append(f'export TRAINYARD_CONFIG="$TRAINYARD_ETC/{name}"')
    if inputs.strategy in ("fsdp", "deepspeed"):
        lines.append('export TRAINYARD_ACCELERATE_CONFIG="$TRAINYARD_ETC/accelerate.yaml"')
    lines += [f'export {k}="{v}"' for k, v in _tracking(inputs)]
    lines += [f"export {k}={shlex.quote(v)}" for k, v in nccl_settings(inputs)]
    if ifname := socket_ifname(inputs):  # gloo (CPU collectives, the test host) reads its own
        lines.append(f"export GLOO_SOCKET_IFNAME={shlex.quote(ifname)}")
    lines.append('export PATH="$TRAINYARD_VENV/bin:$PATH"')
    return "\n".join(lines) + "\n"


def render_nccl_conf(inputs: StackInputs) -> str:
    lines = [f"# NCCL settings of {inputs.hostname} (Trainyard order {inputs.order}).",
             "# An environment variable of the same name overrides a line here."]
    lines += [f"{k}={v}" for k, v in nccl_settings(inputs)]
    return "\n".join(lines) + "\n"
