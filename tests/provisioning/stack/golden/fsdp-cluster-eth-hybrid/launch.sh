#!/usr/bin/env bash
# Trainyard launcher for gpu-01 (order O-5EED0001, fsdp): torchrun over this node's GPUs.
# Usage: launch.sh SCRIPT [ARGS...]   or   launch.sh -m MODULE [ARGS...]
# Rendezvous: TRAINYARD_RDZV=static (default: fixed ranks) or c10d (elastic join).
set -euo pipefail
if [ "$#" -lt 1 ]; then
  echo "usage: $0 SCRIPT [ARGS...]" >&2
  exit 2
fi
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
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
case "${TRAINYARD_RDZV:-static}" in
  static)
    exec "$torchrun" --nnodes="$NNODES" --node-rank="$NODE_RANK" --master-addr="$MASTER_ADDR" \
      --master-port="$MASTER_PORT" --nproc-per-node="$NPROC_PER_NODE" "$@" ;;
  c10d)
    exec "$torchrun" --nnodes="$NNODES" --rdzv-backend=c10d \
      --rdzv-endpoint="$MASTER_ADDR:$MASTER_PORT" --rdzv-id="$TRAINYARD_ORDER" \
      --nproc-per-node="$NPROC_PER_NODE" "$@" ;;
  *)
    echo "TRAINYARD_RDZV must be static or c10d, not ${TRAINYARD_RDZV}" >&2
    exit 2 ;;
esac
