# shellcheck shell=bash
# Trainyard environment of gpu-01: node 0 of 1, order O-5EED0001.
# Rendered from the order's plan by the stack step; re-deploying the stack rewrites it.
# Use: . /etc/trainyard/env.sh   (launch.sh sources it for you)
export TRAINYARD_ROOT="${TRAINYARD_ROOT:-}"
export TRAINYARD_ETC="$TRAINYARD_ROOT/etc/trainyard"
export TRAINYARD_VENV="$TRAINYARD_ROOT/opt/trainyard/venv"
export TRAINYARD_DATA="$TRAINYARD_ROOT/data"
export TRAINYARD_CHECKPOINT_DIR="$TRAINYARD_ROOT/data/checkpoints"
export TRAINYARD_ORDER=O-5EED0001
export TRAINYARD_NODE=gpu-01
export TRAINYARD_STRATEGY=ddp
export TRAINYARD_TRACKER=''
export TRAINYARD_DIST_BACKEND=nccl
export MASTER_ADDR=127.0.0.1
export MASTER_PORT=29500
export NNODES=1
export NODE_RANK=0
export NPROC_PER_NODE=8
export WORLD_SIZE=8
export TRAINYARD_MICRO_BATCH=1
export TRAINYARD_GRAD_ACCUM=1
export TRAINYARD_NUM_WORKERS=8
export TRAINYARD_PREFETCH_FACTOR=4
export TRAINYARD_CHECKPOINT_EVERY_STEPS=500
export TRAINYARD_CHECKPOINT_KEEP=3
export NCCL_SOCKET_IFNAME=lo
export GLOO_SOCKET_IFNAME=lo
export PATH="$TRAINYARD_VENV/bin:$PATH"
