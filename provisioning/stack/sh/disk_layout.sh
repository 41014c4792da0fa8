#!/usr/bin/env bash
# Trainyard's data disks (provisioning/stack/disk.py): the NVMe data devices as one XFS filesystem,
# an mdadm array per the order's RAID. Environment: TRAINYARD_DATA_DEVICES (one per line),
# TRAINYARD_RAID (single, raid0, raid10), TRAINYARD_RAID_LEVEL, TRAINYARD_WIPE (1: erase foreign
# devices), TRAINYARD_DATA_MOUNT, TRAINYARD_DATA_LABEL; TRAINYARD_ROOT and TRAINYARD_MD_DEVICE (tests).
set -euo pipefail

root="${TRAINYARD_ROOT:-}"
md="${TRAINYARD_MD_DEVICE:-/dev/md/trainyard-data}"
mount_point="${TRAINYARD_DATA_MOUNT:?TRAINYARD_DATA_MOUNT is not set}"
mnt="$root$mount_point"
label="${TRAINYARD_DATA_LABEL:?TRAINYARD_DATA_LABEL is not set}"
raid="${TRAINYARD_RAID:?TRAINYARD_RAID is not set}"
level="${TRAINYARD_RAID_LEVEL:-0}"
wipe="${TRAINYARD_WIPE:-0}"
mapfile -t devices < <(printf '%s' "${TRAINYARD_DATA_DEVICES:-}")
echo "data disks: $raid over ${#devices[@]} device(s), XFS on $mount_point"

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
erase() {
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
    mdadm --create "$md" --run --level="$level" --raid-devices="${#devices[@]}" "${devices[@]}"
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
  # the device checked above, not whichever device carries the label (another disk may too)
  mount -o noatime "$data" "$mnt"
fi
mkdir -p "$root/etc"
touch "$root/etc/fstab"
if grep -q "^LABEL=$label " "$root/etc/fstab"; then
  echo "fstab already mounts $label"
else
  echo "LABEL=$label $mount_point xfs defaults,noatime,nofail 0 2" >> "$root/etc/fstab"
  echo "added $label to fstab"
fi
echo "data disks ready on $mnt"
