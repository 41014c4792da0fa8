"""Shell scripts for the storage parts that run on a node (``stack/sh/storage_*.sh``): write the
bucket's credentials file, and copy the checkpoint directory to the bucket with the sync tool
(``sync.py``, carried in the script's header and run with Trainyard's node tools:
``TOOLS_PYTHON``, boto3 pinned).

Secrets never appear in a script's text: the key id, secret, endpoint and bucket come in the
environment the driver passes (``STORAGE_ENV_*``), which drivers keep out of logs and ``ps``.
Scripts honour ``TRAINYARD_ROOT`` (tests run them against a scratch root).
"""

from __future__ import annotations

from pathlib import Path

from provisioning.stack.paths import S3_CREDENTIALS, S3_ENV
from provisioning.stack.shell import node_script

SYNC_TOOL = Path(__file__).with_name("sync.py")
# A line the retain script prints when there is nothing to copy (no directory, or empty);
# written out in the script (the simulated driver answers its echo lines).
NOTHING_TO_COPY = "TRAINYARD_NO_CHECKPOINTS"
CREDENTIALS_FILE = S3_CREDENTIALS
ENV_FILE = S3_ENV
PROFILE = "trainyard"
# Exit statuses of the retain script (75 = EX_TEMPFAIL: the pipeline retries).
RETRY_LATER, NO_PYTHON, BAD_ARGUMENTS = 75, 3, 2


def storage_env(*, endpoint: str, bucket: str, region: str, access_key_id: str,
                secret: str) -> dict[str, str]:
    """What the scripts below read from their environment."""
    return {"TRAINYARD_S3_ENDPOINT": endpoint, "TRAINYARD_S3_BUCKET": bucket,
            "TRAINYARD_S3_REGION": region, "AWS_ACCESS_KEY_ID": access_key_id,
            "AWS_SECRET_ACCESS_KEY": secret}


def credentials_script() -> str:
    """(Re)writes the node's credentials file and env file for the order's bucket, atomically
    (``stack/sh/storage_credentials.sh``)."""
    return node_script("storage_credentials", values={
        "TRAINYARD_CREDENTIALS_FILE": CREDENTIALS_FILE, "TRAINYARD_ENV_FILE": ENV_FILE,
        "TRAINYARD_PROFILE": PROFILE})


def retain_script(*, prefix: str) -> str:
    """Copies ``$TRAINYARD_ROOT<CHECKPOINT_DIR>`` to ``<bucket>/<prefix>/`` and verifies it
    (the sync tool prints one JSON summary line), with Trainyard's own node tools
    (``TOOLS_PYTHON``, installed at deploy). Prints NOTHING_TO_COPY when there is nothing
    (``stack/sh/storage_retain.sh``; the tool travels in its header)."""
    return node_script("storage_retain", values={
        "TRAINYARD_RETAIN_PREFIX": prefix, "TRAINYARD_SYNC_TOOL": _sync_tool_text(),
        "TRAINYARD_NO_PYTHON_STATUS": NO_PYTHON, "TRAINYARD_BAD_ARGUMENTS_STATUS": BAD_ARGUMENTS,
        "TRAINYARD_RETRY_STATUS": RETRY_LATER})


def _sync_tool_text() -> str:
    return SYNC_TOOL.read_text(encoding="utf-8")
