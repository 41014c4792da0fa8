"""``launch.sh``: torchrun over all local GPUs (a CPU test host: 2 gloo processes).

Usage on the node: ``/etc/trainyard/launch.sh SCRIPT [ARGS...]`` (or ``-m MODULE [ARGS...]``).
It sources ``env.sh`` next to it and runs the venv's ``torchrun``: a single node with
``--standalone``; a cluster with static rendezvous (``--node-rank``, ``--master-addr``) by default,
or c10d (``--rdzv-backend=c10d``, any node may join in any order) with ``TRAINYARD_RDZV=c10d``.
"""

from __future__ import annotations

from provisioning.stack.inputs import StackInputs

_HEAD = """#!/usr/bin/env bash
# Trainyard launcher for {host} (order {order}, {strategy}): torchrun over this node's GPUs.
# Usage: launch.sh SCRIPT [ARGS...]   or   launch.sh -m MODULE [ARGS...]
{rdzv_doc}set -euo pipefail
if [ "$#" -lt 1 ]; then
  echo "usage: $0 SCRIPT [ARGS...]" >&2
  exit 2
fi
here=$(cd "$(dirname "${{BASH_SOURCE[0]}}")" && pwd)
# This file lives in $TRAINYARD_ROOT/etc/trainyard: the root is two levels up ("" on a node).
TRAINYARD_ROOT=$(cd "$here/../.." && pwd)
if [ "$TRAINYARD_ROOT" = / ]; then TRAINYARD_ROOT=""; fi
export TRAINYARD_ROOT
# shellcheck source=/dev/null
. "$here/env.sh"
torchrun="$TRAINYARD_VENV/bin/torchrun"
if [ ! -x "$torchrun" ]; then
  echo "$torchrun not found: run bootstrap.sh first" >&2
  exit 3
fi
"""

_SINGLE = """exec "$torchrun" --standalone --nnodes=1 --nproc-per-node="$NPROC_PER_NODE" "$@"
"""

_CLUSTER = """case "${TRAINYARD_RDZV:-static}" in
  static)
    exec "$torchrun" --nnodes="$NNODES" --node-rank="$NODE_RANK" --master-addr="$MASTER_ADDR" \\
      --master-port="$MASTER_PORT" --nproc-per-node="$NPROC_PER_NODE" "$@" ;;
  c10d)
    exec "$torchrun" --nnodes="$NNODES" --rdzv-backend=c10d \\
      --rdzv-endpoint="$MASTER_ADDR:$MASTER_PORT" --rdzv-id="$TRAINYARD_ORDER" \\
      --nproc-per-node="$NPROC_PER_NODE" "$@" ;;
  *)
    echo "TRAINYARD_RDZV must be static or c10d, not ${TRAINYARD_RDZV}" >&2
    exit 2 ;;
esac
"""


def render_launch(inputs: StackInputs) -> str:
    rdzv_doc = ("# Rendezvous: TRAINYARD_RDZV=static (default: fixed ranks) or c10d (elastic join).\n"
                if inputs.cluster else "")
    head = _HEAD.format(host=inputs.hostname, order=inputs.order, strategy=inputs.strategy,
                        rdzv_doc=rdzv_doc)
    return head + (_CLUSTER if inputs.cluster else _SINGLE)
