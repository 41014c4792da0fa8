"""The data disk layout of the configure step: the node's NVMe data devices as one XFS
filesystem on ``/data`` (an mdadm array per the order's RAID), in fstab. Re-runnable: an array,
filesystem or mount that is already ours (label ``trainyard-data``) is kept.

Safe: a device with partitions, a filesystem or other signature, or that belongs to an array,
is refused unless the order says ``wipe_data_devices``; then it is unmounted, its array stopped
and its signatures erased first. Only the configure step runs this; the stack step never
touches ``/data``.
"""

from __future__ import annotations

import shlex

LABEL = "trainyard-data"
MOUNT = "/data"
LEVELS = {"raid0": "0", "raid10": "10"}

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
for tool in blkid lsblk wipefs mkfs.xfs mount mountpoint; do
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
  if [ -n "$(lsblk -nro NAME "$dev" 2>/dev/null | tail -n +2)" ]; then found="partitions"; fi
  if [ -n "$(wipefs -n "$dev" 2>/dev/null | tail -n +2)" ]; then found="${found:+$found, }a signature"; fi
  if command -v mdadm >/dev/null 2>&1 && mdadm --examine "$dev" >/dev/null 2>&1; then
    found="${found:+$found, }an array superblock"
  fi
  printf '%s' "$found"
}
erase() {
  local dev=$1 part
  for part in $(lsblk -nro NAME "$dev" 2>/dev/null); do
    if mountpoint -q "/dev/$part" 2>/dev/null; then umount "/dev/$part"; fi
  done
  if command -v mdadm >/dev/null 2>&1; then
    if mdadm --detail "$md" >/dev/null 2>&1; then mdadm --stop "$md"; fi
    mdadm --zero-superblock "$dev" 2>/dev/null || true
  fi
  wipefs -a "$dev"
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
    script = _SCRIPT
    for name, value in values.items():
        script = script.replace(f"@@{name}@@", value)
    return script
