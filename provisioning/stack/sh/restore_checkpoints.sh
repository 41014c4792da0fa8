#!/usr/bin/env bash
# restore-checkpoints (provisioning/stack/units.py): restores $TRAINYARD_ROOT/data/checkpoints
# from the order's bucket before training resumes: every node's copy (the first node's holds the
# .metadata), this node's last. Run it on every node.
# Header (rendered from the order): TRAINYARD_CHECKPOINT_PREFIXES (space separated, in order).
set -euo pipefail

root="${TRAINYARD_ROOT:-}"
dst="$root/data/checkpoints"
if [ ! -r "$root/etc/trainyard/s3.env" ]; then
  echo "$root/etc/trainyard/s3.env not found: the bucket's credentials are not on this node" >&2
  exit 3
fi
# shellcheck source=/dev/null
. "$root/etc/trainyard/s3.env"
mkdir -p "$dst"
read -r -a prefixes <<< "$TRAINYARD_CHECKPOINT_PREFIXES"
for prefix in "${prefixes[@]}"; do
  echo "restoring s3://$TRAINYARD_BUCKET/$prefix/"
  "$root/opt/trainyard/tools/bin/python" "$root/opt/trainyard/bin/trainyard-sync.py" --download \
    --bucket "$TRAINYARD_BUCKET" --prefix "$prefix" "$dst"
done
