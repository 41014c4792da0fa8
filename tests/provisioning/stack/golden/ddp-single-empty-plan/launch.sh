#!/usr/bin/env bash
# Trainyard launcher for gpu-01 (order O-5EED0001, ddp): torchrun over this node's GPUs.
# Usage: launch.sh SCRIPT [ARGS...]   or   launch.sh -m MODULE [ARGS...]
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
exec "$torchrun" --standalone --nnodes=1 --nproc-per-node="$NPROC_PER_NODE" "$@"
