#!/usr/bin/env bash
# Trainyard launcher for gpu-02 (order O-5EED0001, stack deepspeed).
# Usage: launch.sh SCRIPT [ARGS...]  or  launch.sh -m MODULE [ARGS...]: torchrun over the GPUs
#        launch.sh --stack SCRIPT [ARGS...]: accelerate launch --config_file /etc/trainyard/accelerate.yaml (DeepSpeed, deepspeed.json)
# Rendezvous: TRAINYARD_RDZV=static (default: fixed ranks) or c10d (elastic join).
set -euo pipefail
usage() {
  echo "usage: $0 SCRIPT [ARGS...] | $0 -m MODULE [ARGS...] | $0 --stack SCRIPT [ARGS...]" >&2
  exit 2
}
stack=0
if [ "${1:-}" = --stack ]; then
  stack=1
  shift
fi
if [ "$#" -lt 1 ]; then usage; fi
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# This file lives in $TRAINYARD_ROOT/etc/trainyard: the root is two levels up ("" on a node).
TRAINYARD_ROOT=$(cd "$here/../.." && pwd)
if [ "$TRAINYARD_ROOT" = / ]; then TRAINYARD_ROOT=""; fi
export TRAINYARD_ROOT
# shellcheck source=/dev/null
. "$here/env.sh"
need() {
  if [ ! -x "$1" ]; then
    echo "$1 not found: run bootstrap.sh first" >&2
    exit 3
  fi
}
torchrun="$TRAINYARD_VENV/bin/torchrun"
case "${TRAINYARD_RDZV:-static}" in
  static) rdzv=(--nnodes="$NNODES" --node-rank="$NODE_RANK" --master-addr="$MASTER_ADDR"
                --master-port="$MASTER_PORT") ;;
  c10d) rdzv=(--nnodes="$NNODES" --rdzv-backend=c10d --rdzv-endpoint="$MASTER_ADDR:$MASTER_PORT"
              --rdzv-id="$TRAINYARD_ORDER") ;;
  *)
    echo "TRAINYARD_RDZV must be static or c10d, not ${TRAINYARD_RDZV}" >&2
    exit 2 ;;
esac
if [ "$stack" = 1 ]; then
  accelerate="$TRAINYARD_VENV/bin/accelerate"
  need "$accelerate"
  extra=()
  if [ "${TRAINYARD_RDZV:-static}" = c10d ]; then extra=(--rdzv_backend c10d); fi
  exec "$accelerate" launch --config_file "$TRAINYARD_ACCELERATE_CONFIG" "${extra[@]}" "$@"
fi
need "$torchrun"
exec "$torchrun" "${rdzv[@]}" --nproc-per-node="$NPROC_PER_NODE" "$@"
