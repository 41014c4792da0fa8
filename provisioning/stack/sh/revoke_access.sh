#!/usr/bin/env bash
# Hand-back, first step: the customer's access ends the moment termination starts. Removes the
# Trainyard-managed keys (the only keys sshd reads for the login user: stack/access.py), makes a
# password the customer may have set unusable, removes the user's crontab and lingering user
# manager (they would start processes again), then ends the user's sessions and every process
# it runs, and checks none is left. Root and the account Trainyard manages the node with are
# never the customer's: nothing of theirs is touched.
# Environment: TRAINYARD_LOGIN_USER; TRAINYARD_ROOT (tests: a scratch root).
set -euo pipefail

root="${TRAINYARD_ROOT:-}"
user="${TRAINYARD_LOGIN_USER:?TRAINYARD_LOGIN_USER is not set}"
rm -f "$root/etc/trainyard/authorized_keys"
echo "customer SSH keys removed"
if ! uid=$(id -u "$user" 2>/dev/null); then
  echo "no account $user on this node: no session to end"
  exit 0
fi
if [ "$uid" = 0 ] || [ "$user" = "$(id -un)" ]; then
  echo "$user is the account Trainyard manages this node with: its processes are not the customer's, none ended"
  exit 0
fi
if command -v usermod >/dev/null 2>&1; then
  usermod -p '*' "$user"  # no password login; key login (none left) is unaffected
  echo "password login of $user disabled"
fi
if command -v crontab >/dev/null 2>&1 && crontab -l -u "$user" >/dev/null 2>&1; then
  crontab -r -u "$user"
  echo "crontab of $user removed"
fi
if command -v loginctl >/dev/null 2>&1; then
  loginctl disable-linger "$user" 2>/dev/null || true
  loginctl terminate-user "$user" 2>/dev/null || true
fi
pkill -KILL -u "$user" || true
tries=0
while pgrep -u "$user" >/dev/null 2>&1; do
  tries=$((tries + 1))
  if [ "$tries" -gt "${TRAINYARD_KILL_TRIES:-20}" ]; then  # half-second tries
    echo "processes of $user survive pkill -KILL:"
    pgrep -a -u "$user" || true
    exit 9
  fi
  sleep 0.5
  pkill -KILL -u "$user" || true
done
echo "sessions and processes of $user ended"
