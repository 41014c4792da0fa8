#!/usr/bin/env bash
# Trainyard launcher (provisioning/stack/launch.py): how to start training on this node.
# Usage: launch.sh SCRIPT [ARGS...]  or  launch.sh -m MODULE [ARGS...]: torchrun over the GPUs
#        launch.sh --stack ...: the way the ordered stack (TRAINYARD_LAUNCH_STACK below) needs:
#          ddp         the same torchrun (DDP needs no other launcher)
#          fsdp        accelerate launch --config_file /etc/trainyard/accelerate.yaml (FSDP2)
#          deepspeed   accelerate launch --config_file /etc/trainyard/accelerate.yaml (DeepSpeed,
#                      deepspeed.json)
#          torchtitan  torchrun -m torchtitan.train --job.config_file /etc/trainyard/torchtitan.toml
#                      [OVERRIDES...]
# On a cluster, rendezvous: TRAINYARD_RDZV=static (default: fixed ranks) or c10d (elastic join).
# Exit 2: bad usage; 3: a launcher is not installed (run bootstrap.sh first).
# Header (rendered from the order): TRAINYARD_LAUNCH_STACK, TRAINYARD_LAUNCH_USAGE (what --stack
# takes), TRAINYARD_LAUNCH_CLUSTER (1: more than one node).
set -euo pipefail

usage() {
  echo "usage: $0 SCRIPT [ARGS...] | $0 -m MODULE [ARGS...] | $0 --stack $TRAINYARD_LAUNCH_USAGE" >&2
  exit 2
}
stack=0
if [ "${1:-}" = --stack ]; then
  stack=1
  shift
fi
if [ "$TRAINYARD_LAUNCH_STACK" = ddp ]; then stack=0; fi  # DDP's launcher is the plain torchrun
# Only torchtitan's own launcher needs no script (its job config names the model).
if [ "$#" -lt 1 ] && { [ "$stack" = 0 ] || [ "$TRAINYARD_LAUNCH_STACK" != torchtitan ]; }; then
  usage
fi
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
if [ "$TRAINYARD_LAUNCH_CLUSTER" != 1 ]; then
  rdzv=(--standalone --nnodes=1)
else
  case "${TRAINYARD_RDZV:-static}" in
    static) rdzv=(--nnodes="$NNODES" --node-rank="$NODE_RANK" --master-addr="$MASTER_ADDR"
                  --master-port="$MASTER_PORT") ;;
    c10d) rdzv=(--nnodes="$NNODES" --rdzv-backend=c10d --rdzv-endpoint="$MASTER_ADDR:$MASTER_PORT"
                --rdzv-id="$TRAINYARD_ORDER") ;;
    *)
      echo "TRAINYARD_RDZV must be static or c10d, not ${TRAINYARD_RDZV}" >&2
      exit 2 ;;
  esac
fi
if [ "$stack" = 1 ]; then
  case "$TRAINYARD_LAUNCH_STACK" in
    fsdp|deepspeed)
      accelerate="$TRAINYARD_VENV/bin/accelerate"
      need "$accelerate"
      extra=()
      if [ "${TRAINYARD_RDZV:-static}" = c10d ]; then extra=(--rdzv_backend c10d); fi
      exec "$accelerate" launch --config_file "$TRAINYARD_ACCELERATE_CONFIG" "${extra[@]}" "$@" ;;
    torchtitan)
      need "$torchrun"
      exec "$torchrun" "${rdzv[@]}" --nproc-per-node="$NPROC_PER_NODE" -m torchtitan.train \
        --job.config_file "$TRAINYARD_CONFIG" "$@" ;;
  esac
fi
need "$torchrun"
exec "$torchrun" "${rdzv[@]}" --nproc-per-node="$NPROC_PER_NODE" "$@"
