"""The shell scripts the pipeline runs on a node, one function each (the training stack's files
are rendered by ``provisioning.stack.bundle``; the disk layout by ``provisioning.stack.disk``).

Scripts read ``TRAINYARD_*`` variables the pipeline sets (order, node, rank, node count, GPUs per
node, master address) and honour ``TRAINYARD_ROOT`` (tests run them against a scratch root).
"""

from __future__ import annotations

import shlex

from provisioning.stack.disk import RELEASE_DEVICE


def revoke_script(login_user: str) -> str:
    """Ends the customer's SSH access: removes the Trainyard-managed keys (the only file sshd reads
    for the login user, ``stack.access``), then ends the user's sessions and every process it
    still runs (``loginctl terminate-user``, then ``pkill -KILL -u``) and checks none is left.
    Root's processes are never killed (a customer never logs in as root)."""
    user = shlex.quote(login_user)
    return f"""#!/bin/sh
set -eu
echo "revoking customer SSH access"
root="${{TRAINYARD_ROOT:-}}"
rm -f "$root/etc/trainyard/authorized_keys"
echo "customer keys removed"
user={user}
if ! uid=$(id -u "$user" 2>/dev/null); then
  echo "no account $user on this node: no session to end"
  exit 0
fi
if [ "$uid" = 0 ]; then
  echo "$user is root: its processes are not the customer's to end, none killed"
  exit 0
fi
if command -v loginctl >/dev/null 2>&1; then loginctl terminate-user "$user" 2>/dev/null || true; fi
pkill -KILL -u "$user" || true
i=0
while pgrep -u "$user" >/dev/null 2>&1; do
  i=$((i + 1))
  if [ "$i" -gt "${{TRAINYARD_KILL_TRIES:-20}}" ]; then  # half-second tries
    echo "processes of $user survive pkill -KILL:"
    pgrep -a -u "$user" || true
    exit 9
  fi
  sleep 0.5
  pkill -KILL -u "$user" || true
done
echo "sessions and processes of $user ended"
"""


# What runs on /data for the customer: stopped before it is unmounted.
DATA_UNITS = ("trainyard-checkpoint-sync.timer", "trainyard-checkpoint-sync.service",
              "trainyard-tensorboard.service")


def wipe_script(devices: list[str]) -> str:
    """Stops what uses ``/data`` (the checkpoint sync timer, TensorBoard, any process left), unmounts
    it, frees every device as the configure step does (mounts, arrays it belongs to), then discards
    it. Re-runnable: what is already stopped, unmounted or discarded is skipped or done again."""
    if not devices:
        return '#!/bin/sh\necho "no NVMe data devices recorded on this node; nothing to wipe"\n'
    quoted = " ".join(shlex.quote(d) for d in devices)
    units = " ".join(DATA_UNITS)
    return f"""#!/usr/bin/env bash
set -euo pipefail
root="${{TRAINYARD_ROOT:-}}"
data="$root/data"
for tool in lsblk findmnt umount mdadm blkdiscard; do
  command -v "$tool" >/dev/null 2>&1 || {{ echo "$tool not found: cannot wipe the data disks"; exit 5; }}
done
if command -v systemctl >/dev/null 2>&1; then
  for unit in {units}; do
    if systemctl is-active --quiet "$unit"; then systemctl stop "$unit"; echo "stopped $unit"; fi
  done
fi
if mountpoint -q "$data"; then
  if command -v fuser >/dev/null 2>&1; then fuser -km "$data" >/dev/null 2>&1 || true; fi
  umount "$data"
  echo "unmounted $data"
fi
{RELEASE_DEVICE}for dev in {quoted}; do
  release_device "$dev"
  echo "wiping $dev"
  blkdiscard -f "$dev"
done
echo "wipe done"
"""
