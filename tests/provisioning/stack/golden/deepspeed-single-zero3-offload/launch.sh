#!/usr/bin/env bash
# Trainyard launcher for gpu-01 (order O-5EED0001, stack deepspeed).
# Usage: launch.sh SCRIPT [ARGS...]  or  launch.sh -m MODULE [ARGS...]: torchrun over the GPUs
#        launch.sh --stack SCRIPT [ARGS...]: accelerate launch --config_file /etc/trainyard/accelerate.yaml (DeepSpeed, deepspeed.json)
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
rdzv=(--standalone --nnodes=1)
if [ "$stack" = 1 ]; then
  accelerate="$TRAINYARD_VENV/bin/accelerate"
  need "$accelerate"
  extra=()
  if [ "${TRAINYARD_RDZV:-static}" = c10d ]; then extra=(--rdzv_backend c10d); fi
  exec "$accelerate" launch --config_file "$TRAINYARD_ACCELERATE_CONFIG" "${extra[@]}" "$@"
fi
need "$torchrun"
exec "$torchrun" "${rdzv[@]}" --nproc-per-node="$NPROC_PER_NODE" "$@"
