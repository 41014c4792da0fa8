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
from provisioning.stack.paths import BIN, CHECKPOINT_DIR, DATA, VENV
from provisioning.stack.shell import node_script
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
    """``sh/sync_checkpoints.sh`` with what this order copies and keeps in its header."""
    return node_script("sync_checkpoints", values={
        "TRAINYARD_CHECKPOINT_COPY": "1" if inputs.storage else "0",
        "TRAINYARD_CHECKPOINT_PREFIX": inputs.checkpoint_prefix,
        "TRAINYARD_CHECKPOINT_PRUNE": "1" if inputs.prunes_checkpoints else "0",
        "TRAINYARD_CHECKPOINTS_KEPT": CHECKPOINTS_KEPT})


def render_restore_script(inputs: StackInputs) -> str:
    """Downloads every node's checkpoint prefix into this node's directory (resume)."""
    order = [h for h in inputs.cluster_hostnames if h != inputs.hostname] + [inputs.hostname]
    return node_script("restore_checkpoints", values={
        "TRAINYARD_CHECKPOINT_PREFIXES": " ".join(f"checkpoints/{h}" for h in order)})


def sync_tool() -> str:
    return SYNC_TOOL_SOURCE.read_text(encoding="utf-8")
