"""Where Trainyard keeps things on a node: the one source for the stack's renderers, the
pipeline's scripts and the hand-back. Paths are absolute on the node; scripts put
``$TRAINYARD_ROOT`` in front of each (tests run them under a scratch root)."""

from __future__ import annotations

ETC = "/etc/trainyard"  # the order's files: env, launch configs, keys, bucket credentials
DATA = "/data"  # the data disks (XFS, configure step) or a directory on the system disk
CHECKPOINT_DIR = f"{DATA}/checkpoints"  # copied to the bucket by the sync timer and at termination
OPT = "/opt/trainyard"
BIN = f"{OPT}/bin"  # the order's tools: sync-checkpoints, restore-checkpoints, pack-shards
VENV = f"{OPT}/venv"  # the training stack's environment
# Trainyard's own node-side runtime (the sync tool's boto3), pinned and owned by root: never the
# customer's training venv, never whatever python3 is first on the PATH.
TOOLS = f"{OPT}/tools"
TOOLS_PYTHON = f"{TOOLS}/bin/python"
STATE = "/var/lib/trainyard"  # the fencing token (drivers.ssh), the acceptance runs' directories
UNITS = "/etc/systemd/system"

AUTHORIZED_KEYS = f"{ETC}/authorized_keys"
ENV_SH = f"{ETC}/env.sh"
S3_CREDENTIALS = f"{ETC}/s3-credentials"
S3_ENV = f"{ETC}/s3.env"

# systemd units the stack renders for an order (stopped and removed at hand-back).
SYNC_TIMER = "trainyard-checkpoint-sync.timer"
SYNC_SERVICE = "trainyard-checkpoint-sync.service"
TENSORBOARD_SERVICE = "trainyard-tensorboard.service"
ORDER_UNITS = (SYNC_TIMER, SYNC_SERVICE, TENSORBOARD_SERVICE)
