#!/usr/bin/env bash
# The fence guard (provisioning/drivers/ssh.py): the first part of every fenced script the ssh
# driver stages, so two executions never work on a node at once. Under flock on
# $1/fence.lock ($1: the fence directory, $TRAINYARD_ROOT/var/lib/trainyard): an execution older
# than the newest token seen ($1/fence) is refused; a newer one first stops the process group of
# the older one still running ($1/pgid, its token in $1/pgid.fence), then runs the script proper
# (this staged file from line TRAINYARD_FENCE_SCRIPT_LINE on) in a process group of its own, and
# reports TRAINYARD_FENCED_STATUS instead of its status if a newer execution took the node
# meanwhile. The guard never reads that far: it exits first.
# Header (written by the driver above this body): TRAINYARD_FENCE_TOKEN, TRAINYARD_FENCE_SCRIPT_LINE,
# TRAINYARD_FENCED_STATUS, TRAINYARD_RETRY_STATUS.

d="$1"
token="$TRAINYARD_FENCE_TOKEN"
mkdir -p "$d" || exit 126
exec 9>>"$d/fence.lock"
flock 9 || exit 126
cur=$(cat "$d/fence" 2>/dev/null || true)
if [ "${cur:-0}" -gt "$token" ]; then
  echo "trainyard: a newer execution holds this node (fence $cur, ours $token); stopping"
  exit "$TRAINYARD_FENCED_STATUS"
fi
echo "$token" > "$d/fence"
old=$(cat "$d/pgid" 2>/dev/null || true)
oldf=$(cat "$d/pgid.fence" 2>/dev/null || true)
if [ -n "$old" ] && [ "${oldf:-0}" -lt "$token" ] && kill -0 -- "-$old" 2>/dev/null; then
  echo "trainyard: stopping an earlier execution (fence $oldf, process group $old)"
  kill -TERM -- "-$old" 2>/dev/null || true
  i=0
  while kill -0 -- "-$old" 2>/dev/null; do
    i=$((i+1))
    [ $i -eq 100 ] && kill -KILL -- "-$old" 2>/dev/null
    [ $i -gt 300 ] && { echo "trainyard: the earlier execution does not stop"; exit "$TRAINYARD_RETRY_STATUS"; }
    sleep 0.1
  done
fi
s=$(mktemp "${TMPDIR:-/tmp}/trainyard-step-XXXXXXXX") || exit 126
tail -n +"$TRAINYARD_FENCE_SCRIPT_LINE" "$0" > "$s"
setsid bash "$s" </dev/null 9>&- 2>&1 &
pid=$!
echo "$pid" > "$d/pgid"
echo "$token" > "$d/pgid.fence"
flock -u 9
wait "$pid"
status=$?
rm -f "$s"
flock 9
if [ "$(cat "$d/fence" 2>/dev/null)" != "$token" ]; then
  echo "trainyard: a newer execution took this node while the script ran"
  exit "$TRAINYARD_FENCED_STATUS"
fi
if [ "$(cat "$d/pgid.fence" 2>/dev/null)" = "$token" ]; then rm -f "$d/pgid" "$d/pgid.fence"; fi
exit $status
