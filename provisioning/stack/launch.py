"""``launch.sh``: how to start training on this node, the plain way and the ordered stack's way.

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

_HEAD = """#!/usr/bin/env bash
# Trainyard launcher for {host} (order {order}, stack {strategy}).
# Usage: launch.sh SCRIPT [ARGS...]  or  launch.sh -m MODULE [ARGS...]: torchrun over the GPUs
#        launch.sh --stack {stack_usage}: {stack_doc}
{rdzv_doc}set -euo pipefail
usage() {{
  echo "usage: $0 SCRIPT [ARGS...] | $0 -m MODULE [ARGS...] | $0 --stack {stack_usage}" >&2
  exit 2
}}
{stack_parse}{need_args}here=$(cd "$(dirname "${{BASH_SOURCE[0]}}")" && pwd)
# This file lives in $TRAINYARD_ROOT/etc/trainyard: the root is two levels up ("" on a node).
TRAINYARD_ROOT=$(cd "$here/../.." && pwd)
if [ "$TRAINYARD_ROOT" = / ]; then TRAINYARD_ROOT=""; fi
export TRAINYARD_ROOT
# shellcheck source=/dev/null
. "$here/env.sh"
need() {{
  if [ ! -x "$1" ]; then
    echo "$1 not found: run bootstrap.sh first" >&2
    exit 3
  fi
}}
torchrun="$TRAINYARD_VENV/bin/torchrun"
"""

_SINGLE = """rdzv=(--standalone --nnodes=1)
"""

_CLUSTER = """case "${TRAINYARD_RDZV:-static}" in
  static) rdzv=(--nnodes="$NNODES" --node-rank="$NODE_RANK" --master-addr="$MASTER_ADDR"
                --master-port="$MASTER_PORT") ;;
  c10d) rdzv=(--nnodes="$NNODES" --rdzv-backend=c10d --rdzv-endpoint="$MASTER_ADDR:$MASTER_PORT"
              --rdzv-id="$TRAINYARD_ORDER") ;;
  *)
    echo "TRAINYARD_RDZV must be static or c10d, not ${TRAINYARD_RDZV}" >&2
    exit 2 ;;
esac
"""

_PLAIN = """need "$torchrun"
exec "$torchrun" "${rdzv[@]}" --nproc-per-node="$NPROC_PER_NODE" "$@"
"""

_ACCELERATE = """if [ "$stack" = 1 ]; then
  accelerate="$TRAINYARD_VENV/bin/accelerate"
  need "$accelerate"
  extra=()
  if [ "${TRAINYARD_RDZV:-static}" = c10d ]; then extra=(--rdzv_backend c10d); fi
  exec "$accelerate" launch --config_file "$TRAINYARD_ACCELERATE_CONFIG" "${extra[@]}" "$@"
fi
"""

_TORCHTITAN = """if [ "$stack" = 1 ]; then
  need "$torchrun"
  exec "$torchrun" "${rdzv[@]}" --nproc-per-node="$NPROC_PER_NODE" -m torchtitan.train \\
    --job.config_file "$TRAINYARD_CONFIG" "$@"
fi
"""

_STACK_FLAG = """stack=0
if [ "${1:-}" = --stack ]; then
  stack=1
  shift
fi
"""
_STACK_FLAG_DDP = """if [ "${1:-}" = --stack ]; then shift; fi  # DDP's launcher is the plain torchrun
"""

_NEED_ARGS = """if [ "$#" -lt 1 ]; then usage; fi
"""
_NEED_ARGS_PLAIN = """if [ "$stack" = 0 ] && [ "$#" -lt 1 ]; then usage; fi
"""

STACK_USAGE = {"ddp": "SCRIPT [ARGS...]", "fsdp": "SCRIPT [ARGS...]",
               "deepspeed": "SCRIPT [ARGS...]", "torchtitan": "[OVERRIDES...]"}
STACK_DOC = {
    "ddp": "the same torchrun (DDP needs no other launcher)",
    "fsdp": "accelerate launch --config_file /etc/trainyard/accelerate.yaml (FSDP2)",
    "deepspeed": "accelerate launch --config_file /etc/trainyard/accelerate.yaml "
                 "(DeepSpeed, deepspeed.json)",
    "torchtitan": "torchrun -m torchtitan.train --job.config_file /etc/trainyard/torchtitan.toml",
}


def stack_command(strategy: str) -> str:
    """What the server page and docs tell the customer to run to train with the ordered stack."""
    return f"/etc/trainyard/launch.sh --stack {'' if strategy == 'torchtitan' else 'train.py'}".strip()


def render_launch(inputs: StackInputs) -> str:
    rdzv_doc = ("# Rendezvous: TRAINYARD_RDZV=static (default: fixed ranks) or c10d (elastic join).\n"
                if inputs.cluster else "")
    head = _HEAD.format(host=inputs.hostname, order=inputs.order, strategy=inputs.strategy,
                        rdzv_doc=rdzv_doc, stack_usage=STACK_USAGE[inputs.strategy],
                        stack_doc=STACK_DOC[inputs.strategy],
                        need_args=_NEED_ARGS_PLAIN if inputs.strategy == "torchtitan" else _NEED_ARGS,
                        stack_parse=_STACK_FLAG_DDP if inputs.strategy == "ddp" else _STACK_FLAG)
    body = _CLUSTER if inputs.cluster else _SINGLE
    if inputs.strategy in ("fsdp", "deepspeed"):
        body += _ACCELERATE
    elif inputs.strategy == "torchtitan":
        body += _TORCHTITAN
    return head + body + _PLAIN
