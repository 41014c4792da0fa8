#!/usr/bin/env bash
# sync-checkpoints (provisioning/stack/units.py), run by trainyard-checkpoint-sync.timer: copies
# $TRAINYARD_ROOT/data/checkpoints to s3://$TRAINYARD_BUCKET/<TRAINYARD_CHECKPOINT_PREFIX>/ with the
# sync tool (resumable, SHA-256 verified) when a bucket was ordered, then (torchtitan on a cluster,
# which prunes on rank 0 only) keeps this node's newest TRAINYARD_CHECKPOINTS_KEPT step-* directories.
# Header (rendered from the order): TRAINYARD_CHECKPOINT_COPY (1: a bucket was ordered),
# TRAINYARD_CHECKPOINT_PREFIX, TRAINYARD_CHECKPOINT_PRUNE (1: prune), TRAINYARD_CHECKPOINTS_KEPT.
set -euo pipefail

root="${TRAINYARD_ROOT:-}"
src="$root/data/checkpoints"
if [ -L "$src" ]; then
  echo "$src is a symbolic link, which is not followed: nothing copied" >&2
  exit 3
fi
if [ ! -d "$src" ] || [ -z "$(ls -A "$src" 2>/dev/null)" ]; then
  echo "$src is absent or empty: nothing to copy"
  exit 0
fi
if [ "$TRAINYARD_CHECKPOINT_COPY" = 1 ]; then
  if [ ! -r "$root/etc/trainyard/s3.env" ]; then
    echo "$root/etc/trainyard/s3.env not found: the bucket's credentials are not on this node" >&2
    exit 3
  fi
  # shellcheck source=/dev/null
  . "$root/etc/trainyard/s3.env"
  if [ -n "${AWS_SHARED_CREDENTIALS_FILE:-}" ] && [ -r "$AWS_SHARED_CREDENTIALS_FILE" ]; then
    # The key is the customer's own (they can reveal it): it goes to the tool in its environment,
    # because the tool runs as the directory's owner, who cannot read the root-only file.
    AWS_ACCESS_KEY_ID=$(sed -n 's/^aws_access_key_id = //p' "$AWS_SHARED_CREDENTIALS_FILE")
    AWS_SECRET_ACCESS_KEY=$(sed -n 's/^aws_secret_access_key = //p' "$AWS_SHARED_CREDENTIALS_FILE")
    export AWS_ACCESS_KEY_ID AWS_SECRET_ACCESS_KEY
    unset AWS_PROFILE AWS_SHARED_CREDENTIALS_FILE
  fi
  # As the owner of the directory (the customer): it copies only what the customer can read,
  # whatever links or renames happen while it runs.
  as_owner=()
  if [ "$(stat -c %u "$src")" != 0 ]; then
    as_owner=(setpriv --reuid="$(stat -c %u "$src")" --regid="$(stat -c %g "$src")" --clear-groups --)
  fi
  AWS_CONFIG_FILE=/dev/null "${as_owner[@]}" "$root/opt/trainyard/tools/bin/python" \
    "$root/opt/trainyard/bin/trainyard-sync.py" --bucket "$TRAINYARD_BUCKET" \
    --prefix "$TRAINYARD_CHECKPOINT_PREFIX" "$src"
fi
if [ "$TRAINYARD_CHECKPOINT_PRUNE" = 1 ]; then
  # After the copy above succeeded (set -e): every node keeps its newest steps here.
  mapfile -t steps < <(find "$src" -mindepth 1 -maxdepth 1 -type d -name 'step-*' -printf '%f\n' \
    | sort -t- -k2,2n)
  for ((i = 0; i + TRAINYARD_CHECKPOINTS_KEPT < ${#steps[@]}; i++)); do
    rm -rf -- "${src:?}/${steps[i]}"
    echo "pruned ${steps[i]}"
  done
fi
