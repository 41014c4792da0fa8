"""The data disk layout of the configure step: the node's NVMe data devices as one XFS
filesystem on ``/data`` (an mdadm array per the order's RAID), in fstab. Re-runnable: an array,
filesystem or mount that is already ours (label ``trainyard``) is kept.

Safe: a device with partitions, a filesystem or other signature, or that belongs to an array,
is refused unless the order says ``wipe_data_devices``; then ``release_device`` frees it first:
every mount of the device, its partitions and the arrays built on them (``lsblk`` for the tree,
``findmnt`` for the mounts) is unmounted after the processes holding it are killed (``fuser -km``),
every array it belongs to is stopped (``mdadm --stop``), and only then are superblocks zeroed and
signatures erased (``wipefs -a`` fails on a busy device). Only the configure step runs the
layout; the stack step never touches ``/data``. The termination's wipe (``scripts.wipe_script``)
frees the devices the same way.
"""

from __future__ import annotations

import shlex

from provisioning.stack.paths import DATA
from provisioning.stack.shell import lib_function

LABEL = "trainyard"  # XFS labels are at most 12 characters (mkfs.xfs refuses longer ones)
MOUNT = DATA
LEVELS = {"raid0": "0", "raid10": "10"}

# Bash: frees a block device for erasing (sh/lib/release_device.sh; the hand-back uses it too).
RELEASE_DEVICE = lib_function("release_device")

_SCRIPT = r"""#!/usr/bin/env bash
# Trainyard data disks of @@HOST@@: @@RAID@@ over @@COUNT@@ device(s), XFS on /data.
set -euo pipefail
root="${TRAINYARD_ROOT:-}"
md="${TRAINYARD_MD_DEVICE:-/dev/md/trainyard-data}"
mnt="$root@@MOUNT@@"
label=@@LABEL@@
raid=@@RAID@@
wipe=@@WIPE@@
devices=(@@DEVICES@@)

if [ "${#devices[@]}" -eq 0 ]; then
  echo "no NVMe data devices recorded on this node: /data stays on the system disk"
  exit 0
fi
for tool in blkid lsblk findmnt wipefs mkfs.xfs mount umount mountpoint; do
  command -v "$tool" >/dev/null 2>&1 || { echo "$tool not found: cannot lay out the data disks"; exit 3; }
done
if [ "$raid" != single ] && ! command -v mdadm >/dev/null 2>&1; then
  echo "mdadm not found: cannot build the $raid array"
  exit 3
fi

ours() {
  [ -e "$1" ] && [ "$(blkid -o value -s LABEL "$1" 2>/dev/null || true)" = "$label" ]
}
foreign() {
  local dev=$1 found=""
  if lsblk -nrpo NAME,TYPE "$dev" 2>/dev/null | awk '$2 == "part" { f = 1 } END { exit !f }'; then
    found="partitions"
  fi
  if [ -n "$(wipefs -n "$dev" 2>/dev/null | tail -n +2)" ]; then found="${found:+$found, }a signature"; fi
  if command -v mdadm >/dev/null 2>&1 && mdadm --examine "$dev" >/dev/null 2>&1; then
    found="${found:+$found, }an array superblock"
  fi
  printf '%s' "$found"
}
@@RELEASE@@erase() {
  local dev=$1 part parts=()
  release_device "$dev"
  mapfile -t parts < <(lsblk -nrpo NAME "$dev" 2>/dev/null | tail -n +2)
  for part in "${parts[@]}" "$dev"; do
    if command -v mdadm >/dev/null 2>&1 && mdadm --examine "$part" >/dev/null 2>&1; then
      mdadm --zero-superblock "$part"
    fi
    wipefs -a "$part"
  done
  echo "erased $dev (the order's wipe flag is set)"
}

if [ "$raid" = single ]; then data="${devices[0]}"; else data="$md"; fi

if [ "$raid" != single ] && mdadm --detail "$md" >/dev/null 2>&1; then
  echo "array $md already assembled; skipping mdadm --create"
elif ours "$data"; then
  echo "$data already has the $label filesystem; keeping it"
else
  for dev in "${devices[@]}"; do
    what=$(foreign "$dev")
    [ -z "$what" ] && continue
    if [ "$wipe" != 1 ]; then
      echo "refusing $dev: it has $what. Nothing was changed. Check the node, or set the order's"
      echo "wipe flag (wipe_data_devices) to erase the data devices, and retry."
      exit 4
    fi
    erase "$dev"
  done
  if [ "$raid" != single ]; then
    mdadm --create "$md" --run --level=@@LEVEL@@ --raid-devices="${#devices[@]}" "${devices[@]}"
    mkdir -p "$root/etc/mdadm"
    mdadm --detail --brief "$md" >> "$root/etc/mdadm/mdadm.conf"
  fi
fi

if ours "$data"; then
  echo "$data already has a filesystem; skipping mkfs"
else
  mkfs.xfs -q -f -L "$label" "$data"
fi
mkdir -p "$mnt"
if mountpoint -q "$mnt"; then
  echo "$mnt already mounted; skipping mount"
else
  mount -o noatime LABEL="$label" "$mnt"
fi
mkdir -p "$root/etc"
touch "$root/etc/fstab"
if grep -q "^LABEL=$label " "$root/etc/fstab"; then
  echo "fstab already mounts $label"
else
  echo "LABEL=$label @@MOUNT@@ xfs defaults,noatime,nofail 0 2" >> "$root/etc/fstab"
  echo "added $label to fstab"
fi
echo "data disks ready on $mnt"
"""


def disk_layout_script(*, hostname: str, devices, raid: str, wipe: bool) -> str:
    devices = list(devices or ())
    raid = raid if raid in ("single", *LEVELS) else "single"
    if raid != "single" and len(devices) < 2:
        raid = "single"
    values = {"HOST": hostname, "RAID": raid, "COUNT": str(len(devices)), "MOUNT": MOUNT,
              "LABEL": LABEL, "WIPE": "1" if wipe else "0", "LEVEL": LEVELS.get(raid, "0"),
              "DEVICES": " ".join(shlex.quote(d) for d in devices)}
    script = _SCRIPT.replace("@@RELEASE@@", RELEASE_DEVICE)
    for name, value in values.items():
        script = script.replace(f"@@{name}@@", value)
    return script
