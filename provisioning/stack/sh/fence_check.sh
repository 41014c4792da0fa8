#!/bin/sh
# Checks and takes the node's fence, then runs the command (provisioning/drivers/ssh.py, before a
# power command): $1 the fence directory, $2 this execution's token, the rest the command.
# An older token than the newest seen exits TRAINYARD_FENCED_STATUS (header).
d="$1"; mkdir -p "$d" && exec 9>>"$d/fence.lock" && flock 9 || exit 126
cur=$(cat "$d/fence" 2>/dev/null || true)
if [ "${cur:-0}" -gt "$2" ]; then
  echo "trainyard: a newer execution holds this node"
  exit "$TRAINYARD_FENCED_STATUS"
fi
echo "$2" > "$d/fence"; flock -u 9; shift 2; exec "$@"
