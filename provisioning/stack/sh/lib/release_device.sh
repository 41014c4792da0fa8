#!/usr/bin/env bash
# shellcheck shell=bash
# Frees a block device for erasing, deepest holder first (arrays on it, its partitions): every
# mount is unmounted after the processes holding it are killed, every array stopped.
release_device() {
  local dev=$1 i name type target tree=()
  mapfile -t tree < <(lsblk -nrpo NAME,TYPE "$dev" 2>/dev/null || true)
  for ((i = ${#tree[@]} - 1; i >= 0; i--)); do
    read -r name type <<< "${tree[i]}"
    while read -r target; do
      [ -n "$target" ] || continue
      if command -v fuser >/dev/null 2>&1; then fuser -km "$target" >/dev/null 2>&1 || true; fi
      umount "$target"
      echo "unmounted $target ($name)"
    done < <(findmnt -rno TARGET -S "$name" 2>/dev/null || true)
    case "$type" in
      raid*|md) mdadm --stop "$name"; echo "stopped array $name" ;;
      lvm|crypt|dm)
        echo "$dev holds $name ($type): remove it by hand, Trainyard does not"
        exit 4 ;;
    esac
  done
}
