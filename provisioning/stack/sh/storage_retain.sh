#!/bin/sh
# Copies $TRAINYARD_ROOT/data/checkpoints to <bucket>/<TRAINYARD_RETAIN_PREFIX>/ and verifies it
# with the sync tool (provisioning/storage/node.py; it prints one JSON summary line), run with
# Trainyard's own node tools. Prints TRAINYARD_NO_CHECKPOINTS (written out here: the simulated
# driver answers these echo lines) when there is nothing to copy. The bucket's settings and key
# come in the environment: TRAINYARD_S3_ENDPOINT, TRAINYARD_S3_BUCKET, TRAINYARD_S3_REGION,
# AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY; TRAINYARD_ROOT (tests: a scratch root).
# Header: TRAINYARD_RETAIN_PREFIX, TRAINYARD_SYNC_TOOL (sync.py's text), TRAINYARD_NO_PYTHON_STATUS,
# TRAINYARD_BAD_ARGUMENTS_STATUS, TRAINYARD_RETRY_STATUS.
set -u

root="${TRAINYARD_ROOT:-}"
src="$root"/data/checkpoints
if [ -L "$src" ]; then
  echo "TRAINYARD_NO_CHECKPOINTS: $src is a symbolic link, which is not followed: nothing copied"
  exit 0
fi
if [ ! -d "$src" ] || [ -z "$(ls -A "$src" 2>/dev/null)" ]; then
  echo "TRAINYARD_NO_CHECKPOINTS: $src is absent or empty"
  exit 0
fi
py="$root"/opt/trainyard/tools/bin/python
if ! "$py" -c 'import boto3' >/dev/null 2>&1; then
  echo "Trainyard's node tools (/opt/trainyard/tools/bin/python) are missing or broken: cannot copy the checkpoints"
  exit "$TRAINYARD_NO_PYTHON_STATUS"
fi
tool=$(mktemp) || exit "$TRAINYARD_RETRY_STATUS"
trap 'rm -f "$tool"' EXIT
printf '%s\n' "$TRAINYARD_SYNC_TOOL" > "$tool"
echo "copying $src to s3://$TRAINYARD_S3_BUCKET/$TRAINYARD_RETAIN_PREFIX/"
"$py" "$tool" --endpoint "$TRAINYARD_S3_ENDPOINT" --bucket "$TRAINYARD_S3_BUCKET" \
  --region "$TRAINYARD_S3_REGION" --prefix "$TRAINYARD_RETAIN_PREFIX" "$src"
status=$?
case $status in
  0) exit 0 ;;
  "$TRAINYARD_BAD_ARGUMENTS_STATUS") exit "$TRAINYARD_BAD_ARGUMENTS_STATUS" ;;
  *) exit "$TRAINYARD_RETRY_STATUS" ;;
esac
