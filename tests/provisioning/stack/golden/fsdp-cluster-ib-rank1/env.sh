# shellcheck shell=bash
# Trainyard environment of gpu-02: node 1 of 2, order O-5EED0001.
# Rendered from the order's plan by the stack step; re-deploying the stack rewrites it.
# Use: . /etc/trainyard/env.sh   (launch.sh sources it for you)
export TRAINYARD_ROOT="${TRAINYARD_ROOT:-}"
export TRAINYARD_ETC="$TRAINYARD_ROOT/etc/trainyard"
export TRAINYARD_VENV="$TRAINYARD_ROOT/opt/trainyard/venv"
export TRAINYARD_DATA="$TRAINYARD_ROOT/data"
export TRAINYARD_CHECKPOINT_DIR="$TRAINYARD_ROOT/data/checkpoints"
export TRAINYARD_ORDER=O-5EED0001
export TRAINYARD_NODE=gpu-02
export TRAINYARD_STRATEGY=fsdp
export TRAINYARD_TRACKER=tensorboard
export TRAINYARD_DIST_BACKEND=nccl
export MASTER_ADDR=10.20.0.1
export MASTER_PORT=29500
export NNODES=2
export NODE_RANK=1
export NPROC_PER_NODE=8
export WORLD_SIZE=16
export TRAINYARD_MICRO_BATCH=1
export TRAINYARD_GRAD_ACCUM=1
export TRAINYARD_NUM_WORKERS=8
export TRAINYARD_PREFETCH_FACTOR=4
export TRAINYARD_CHECKPOINT_EVERY_STEPS=500
export TRAINYARD_CHECKPOINT_KEEP=3
export ACCELERATE_GRADIENT_ACCUMULATION_STEPS=1
export TRAINYARD_CONFIG="$TRAINYARD_ETC/accelerate.yaml"
export TRAINYARD_ACCELERATE_CONFIG="$TRAINYARD_ETC/accelerate.yaml"
export TENSORBOARD_LOGDIR="$TRAINYARD_DATA/tensorboard"
export NCCL_SOCKET_IFNAME=ib0
export NCCL_IB_HCA=mlx5_0:1,mlx5_1:1
export GLOO_SOCKET_IFNAME=ib0
export PATH="$TRAINYARD_VENV/bin:$PATH"
