"""systemd units: TensorBoard for the ``tensorboard`` tracker, and the checkpoint sync timer
that copies ``/data/checkpoints`` to the order's bucket with the storage sync tool."""

from __future__ import annotations

from provisioning.stack.inputs import CHECKPOINT_DIR, StackInputs
from provisioning.storage.node import ENV_FILE
from provisioning.storage.node import SYNC_TOOL as SYNC_TOOL_SOURCE

SYNC_INTERVAL = "15min"
BIN = "/opt/trainyard/bin"
VENV = "/opt/trainyard/venv"


def render_tensorboard_unit(inputs: StackInputs) -> str:
    return f"""[Unit]
Description=TensorBoard for Trainyard order {inputs.order}
After=network-online.target

[Service]
ExecStart={VENV}/bin/tensorboard --logdir /data/tensorboard --host 127.0.0.1 --port 6006
Restart=on-failure

[Install]
WantedBy=multi-user.target
"""


def render_sync_service(inputs: StackInputs) -> str:
    return f"""[Unit]
Description=Copy {CHECKPOINT_DIR} of {inputs.hostname} to the order's bucket
After=network-online.target

[Service]
Type=oneshot
ExecStart={BIN}/sync-checkpoints
"""


def render_sync_timer(inputs: StackInputs) -> str:
    return f"""[Unit]
Description=Copy checkpoints to the order's bucket every {SYNC_INTERVAL}

[Timer]
OnBootSec={SYNC_INTERVAL}
OnUnitActiveSec={SYNC_INTERVAL}
Persistent=true

[Install]
WantedBy=timers.target
"""


def render_sync_script(inputs: StackInputs) -> str:
    return f"""#!/usr/bin/env bash
# Copies $TRAINYARD_ROOT{CHECKPOINT_DIR} to s3://$TRAINYARD_BUCKET/{inputs.checkpoint_prefix}/
# with the sync tool (resumable, SHA-256 verified). Run by trainyard-checkpoint-sync.timer.
set -euo pipefail
root="${{TRAINYARD_ROOT:-}}"
src="$root{CHECKPOINT_DIR}"
if [ ! -d "$src" ] || [ -z "$(ls -A "$src" 2>/dev/null)" ]; then
  echo "$src is absent or empty: nothing to copy"
  exit 0
fi
if [ ! -r "$root{ENV_FILE}" ]; then
  echo "$root{ENV_FILE} not found: the bucket's credentials are not on this node" >&2
  exit 3
fi
# shellcheck source=/dev/null
. "$root{ENV_FILE}"
exec "$root{VENV}/bin/python" "$root{BIN}/trainyard-sync.py" --bucket "$TRAINYARD_BUCKET" \\
  --prefix {inputs.checkpoint_prefix} "$src"
"""


def sync_tool() -> str:
    return SYNC_TOOL_SOURCE.read_text(encoding="utf-8")
