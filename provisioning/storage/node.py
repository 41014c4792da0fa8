"""Shell scripts for the storage parts that run on a node: write the bucket's credentials file,
and copy the checkpoint directory to the bucket with the sync tool (``sync.py``, carried in the
script as a heredoc and run with Trainyard's node tools: ``TOOLS_PYTHON``, boto3 pinned).

Secrets never appear in a script's text: the key id, secret, endpoint and bucket come in the
environment the driver passes (``STORAGE_ENV_*``), which drivers keep out of logs and ``ps``.
Scripts honour ``TRAINYARD_ROOT`` (tests run them against a scratch root).
"""

from __future__ import annotations

import shlex
from pathlib import Path

from provisioning.stack.paths import CHECKPOINT_DIR, S3_CREDENTIALS, S3_ENV, TOOLS_PYTHON

SYNC_TOOL = Path(__file__).with_name("sync.py")
HEREDOC_END = "TRAINYARD_SYNC_TOOL_END"
# A line the retain script prints when there is nothing to copy (no directory, or empty).
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
    """(Re)writes the node's credentials file and env file for the order's bucket, atomically."""
    return f"""#!/bin/sh
set -eu
root="${{TRAINYARD_ROOT:-}}"
mkdir -p "$root/etc/trainyard"
umask 077
tmp="$root{CREDENTIALS_FILE}.new"
printf '[{PROFILE}]\\naws_access_key_id = %s\\naws_secret_access_key = %s\\n' \\
  "$AWS_ACCESS_KEY_ID" "$AWS_SECRET_ACCESS_KEY" > "$tmp"
mv "$tmp" "$root{CREDENTIALS_FILE}"
umask 022
cat > "$root{ENV_FILE}" <<ENV
export AWS_SHARED_CREDENTIALS_FILE=$root{CREDENTIALS_FILE}
export AWS_PROFILE={PROFILE}
export AWS_ENDPOINT_URL=$TRAINYARD_S3_ENDPOINT
export AWS_REGION=$TRAINYARD_S3_REGION
export TRAINYARD_BUCKET=$TRAINYARD_S3_BUCKET
ENV
echo "bucket $TRAINYARD_S3_BUCKET: key $AWS_ACCESS_KEY_ID written to {CREDENTIALS_FILE}"
echo "settings written to {ENV_FILE}"
"""


def retain_script(*, prefix: str) -> str:
    """Copies ``$TRAINYARD_ROOT<CHECKPOINT_DIR>`` to ``<bucket>/<prefix>/`` and verifies it
    (the sync tool prints one JSON summary line), with Trainyard's own node tools
    (``TOOLS_PYTHON``, installed at deploy). Prints NOTHING_TO_COPY when there is nothing."""
    tool = SYNC_TOOL.read_text(encoding="utf-8")
    if HEREDOC_END in tool:
        raise ValueError(f"sync.py contains the heredoc delimiter {HEREDOC_END}")
    return f"""#!/bin/sh
set -u
root="${{TRAINYARD_ROOT:-}}"
src="$root"{shlex.quote(CHECKPOINT_DIR)}
if [ -L "$src" ]; then
  echo "{NOTHING_TO_COPY}: $src is a symbolic link, which is not followed: nothing copied"
  exit 0
fi
if [ ! -d "$src" ] || [ -z "$(ls -A "$src" 2>/dev/null)" ]; then
  echo "{NOTHING_TO_COPY}: $src is absent or empty"
  exit 0
fi
py="$root"{shlex.quote(TOOLS_PYTHON)}
if ! "$py" -c 'import boto3' >/dev/null 2>&1; then
  echo "Trainyard's node tools ({TOOLS_PYTHON}) are missing or broken: cannot copy the checkpoints"
  exit {NO_PYTHON}
fi
tool=$(mktemp) || exit {RETRY_LATER}
trap 'rm -f "$tool"' EXIT
cat > "$tool" <<'{HEREDOC_END}'
{tool}
{HEREDOC_END}
echo "copying $src to s3://$TRAINYARD_S3_BUCKET/{prefix}/"
"$py" "$tool" --endpoint "$TRAINYARD_S3_ENDPOINT" --bucket "$TRAINYARD_S3_BUCKET" \\
  --region "$TRAINYARD_S3_REGION" --prefix {shlex.quote(prefix)} "$src"
status=$?
case $status in
  0) exit 0 ;;
  {BAD_ARGUMENTS}) exit {BAD_ARGUMENTS} ;;
  *) exit {RETRY_LATER} ;;
esac
"""
