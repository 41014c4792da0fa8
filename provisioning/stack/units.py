"""systemd units: TensorBoard for the ``tensorboard`` tracker, and the checkpoint timer that copies
``/data/checkpoints`` to the order's bucket with the storage sync tool (and, for torchtitan on a
cluster, prunes old steps on every node after the copy).

Checkpoints on a cluster: each node writes its own shards to its own disk (DCP: one
``__<rank>_0.distcp`` per rank, ``.metadata`` by rank 0 on the first node only). Every node copies
its directory to ``checkpoints/<hostname>/`` (the retain step's layout, kept at termination);
``restore-checkpoints`` on every node downloads *every* node's prefix into ``/data/checkpoints``
(the other nodes' first, its own last), so each node has the metadata and the shards it reads
when training resumes. torchtitan purges old steps on rank 0 only: a cluster renders
``keep_latest_k = 0`` and this timer keeps the newest ``CHECKPOINTS_KEPT`` ``step-*`` directories on
every node, after a verified copy when a bucket was ordered.
"""

from __future__ import annotations

from provisioning.stack.inputs import CHECKPOINTS_KEPT, StackInputs
from provisioning.stack.paths import BIN, CHECKPOINT_DIR, DATA, TOOLS_PYTHON, VENV
from provisioning.stack.paths import S3_ENV as ENV_FILE
from provisioning.storage.node import SYNC_TOOL as SYNC_TOOL_SOURCE

SYNC_INTERVAL = "15min"


def render_tensorboard_unit(inputs: StackInputs) -> str:
    return f"""[Unit]
Description=TensorBoard for Trainyard order {inputs.order}
After=network-online.target

[Service]
ExecStart={VENV}/bin/tensorboard --logdir {DATA}/tensorboard --host 127.0.0.1 --port 6006
Restart=on-failure

[Install]
WantedBy=multi-user.target
"""


def _sync_what(inputs: StackInputs) -> str:
    parts = [f"copy {CHECKPOINT_DIR} of {inputs.hostname} to the order's bucket"] if inputs.storage else []
    if inputs.prunes_checkpoints:
        parts.append(f"keep the newest {CHECKPOINTS_KEPT} checkpoint steps")
    text = " and ".join(parts)
    return text[:1].upper() + text[1:]


def render_sync_service(inputs: StackInputs) -> str:
    return f"""[Unit]
Description={_sync_what(inputs)}
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
    copy = f"""if [ ! -r "$root{ENV_FILE}" ]; then
  echo "$root{ENV_FILE} not found: the bucket's credentials are not on this node" >&2
  exit 3
fi
# shellcheck source=/dev/null
. "$root{ENV_FILE}"
if [ -n "${{AWS_SHARED_CREDENTIALS_FILE:-}}" ] && [ -r "$AWS_SHARED_CREDENTIALS_FILE" ]; then
  # The key is the customer's own (they can reveal it): it goes to the tool in its environment,
  # because the tool runs as the directory's owner, who cannot read the root-only file.
  AWS_ACCESS_KEY_ID=$(sed -n 's/^aws_access_key_id = //p' "$AWS_SHARED_CREDENTIALS_FILE")
  AWS_SECRET_ACCESS_KEY=$(sed -n 's/^aws_secret_access_key = //p' "$AWS_SHARED_CREDENTIALS_FILE")
  export AWS_ACCESS_KEY_ID AWS_SECRET_ACCESS_KEY
  unset AWS_PROFILE AWS_SHARED_CREDENTIALS_FILE
fi
# As the owner of the directory (the customer): it copies only what the customer can read, whatever
# links or renames happen while it runs.
as_owner=()
if [ "$(stat -c %u "$src")" != 0 ]; then
  as_owner=(setpriv --reuid="$(stat -c %u "$src")" --regid="$(stat -c %g "$src")" --clear-groups --)
fi
AWS_CONFIG_FILE=/dev/null "${{as_owner[@]}}" "$root{TOOLS_PYTHON}" "$root{BIN}/trainyard-sync.py" \\
  --bucket "$TRAINYARD_BUCKET" --prefix {inputs.checkpoint_prefix} "$src"
""" if inputs.storage else "# no bucket ordered: nothing is copied\n"
    prune = f"""# torchtitan prunes on rank 0 only (keep_latest_k = 0 on a cluster): every node keeps its
# newest {CHECKPOINTS_KEPT} steps here, after the copy above succeeded.
mapfile -t steps < <(find "$src" -mindepth 1 -maxdepth 1 -type d -name 'step-*' -printf '%f\\n' \\
  | sort -t- -k2,2n)
for ((i = 0; i + {CHECKPOINTS_KEPT} < ${{#steps[@]}}; i++)); do
  rm -rf -- "${{src:?}}/${{steps[i]}}"
  echo "pruned ${{steps[i]}}"
done
""" if inputs.prunes_checkpoints else ""
    what = f"s3://$TRAINYARD_BUCKET/{inputs.checkpoint_prefix}/" if inputs.storage else "nowhere"
    return f"""#!/usr/bin/env bash
# Copies $TRAINYARD_ROOT{CHECKPOINT_DIR} to {what}
# with the sync tool (resumable, SHA-256 verified). Run by trainyard-checkpoint-sync.timer.
set -euo pipefail
root="${{TRAINYARD_ROOT:-}}"
src="$root{CHECKPOINT_DIR}"
if [ -L "$src" ]; then
  echo "$src is a symbolic link, which is not followed: nothing copied" >&2
  exit 3
fi
if [ ! -d "$src" ] || [ -z "$(ls -A "$src" 2>/dev/null)" ]; then
  echo "$src is absent or empty: nothing to copy"
  exit 0
fi
{copy}{prune}"""


def render_restore_script(inputs: StackInputs) -> str:
    """Downloads every node's checkpoint prefix into this node's directory (resume)."""
    order = [h for h in inputs.cluster_hostnames if h != inputs.hostname] + [inputs.hostname]
    prefixes = " ".join(f"checkpoints/{h}" for h in order)
    return f"""#!/usr/bin/env bash
# Restores $TRAINYARD_ROOT{CHECKPOINT_DIR} from the order's bucket before training resumes: every
# node's copy (the first node's holds the .metadata), this node's last. Run it on every node.
set -euo pipefail
root="${{TRAINYARD_ROOT:-}}"
dst="$root{CHECKPOINT_DIR}"
if [ ! -r "$root{ENV_FILE}" ]; then
  echo "$root{ENV_FILE} not found: the bucket's credentials are not on this node" >&2
  exit 3
fi
# shellcheck source=/dev/null
. "$root{ENV_FILE}"
mkdir -p "$dst"
prefixes=({prefixes})
for prefix in "${{prefixes[@]}}"; do
  echo "restoring s3://$TRAINYARD_BUCKET/$prefix/"
  "$root{TOOLS_PYTHON}" "$root{BIN}/trainyard-sync.py" --download --bucket "$TRAINYARD_BUCKET" \\
    --prefix "$prefix" "$dst"
done
"""


def sync_tool() -> str:
    return SYNC_TOOL_SOURCE.read_text(encoding="utf-8")
