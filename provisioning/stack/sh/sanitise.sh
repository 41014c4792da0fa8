#!/usr/bin/env bash
# Hand-back: removes everything a tenant had on the node, after its checkpoints were copied.
#  1. the order's units (checkpoint sync timer, TensorBoard): stopped, their files removed;
#  2. the login user's processes, crontab, at jobs and lingering user manager (again);
#  3. all of /etc/trainyard (env, launch configs, keys, bucket credentials) and the order's
#     tools in /opt/trainyard/bin;
#  4. the login user's home (contents removed, /etc/skel copied back) and its files in the places
#     every account may write (/tmp, /var/tmp, /dev/shm, /var/crash, /run/lock, mail …);
#  5. the data: /data is unmounted and each recorded data device is wiped by the node's wipe
#     method (discard: blkdiscard; zero: blkdiscard -z; secure_erase: nvme format --ses=1), then
#     checked to read back zeros where it was sampled, else overwritten with zeros. A device that
#     is mounted anywhere else, or used as swap, is refused: it is not a data device. A node
#     without data devices (method "files") has its data directory's contents deleted; a /data
#     that is then a mount of an undeclared device is refused.
# Nothing is killed by filesystem (no fuser -k): the customer's processes were ended by
# revoke_access, and a /data still busy is an error, not a reason to kill what holds it.
# find never follows a symbolic link, so a link the tenant left cannot point the deletion
# elsewhere. A login user that is root, Trainyard's account or a system account is refused.
# Re-runnable: what is already gone is skipped.
# Environment: TRAINYARD_LOGIN_USER, TRAINYARD_WIPE_METHOD, TRAINYARD_DATA_DEVICES (space
# separated); TRAINYARD_ROOT (tests: a scratch root). Header: TRAINYARD_ORDER_UNITS (the
# order's systemd units, provisioning/stack/paths.py ORDER_UNITS).
set -euo pipefail

root="${TRAINYARD_ROOT:-}"
user="${TRAINYARD_LOGIN_USER:-}"
method="${TRAINYARD_WIPE_METHOD:?TRAINYARD_WIPE_METHOD is not set}"
read -r -a devices <<< "${TRAINYARD_DATA_DEVICES:-}"
data="$root/data"

case "$method" in
  discard|zero|secure_erase)
    if [ "${#devices[@]}" -eq 0 ]; then
      echo "wipe method $method but no data devices recorded: record the devices or choose 'files'"
      exit 2
    fi ;;
  files)
    if [ "${#devices[@]}" -gt 0 ]; then
      echo "wipe method files but data devices are recorded (${devices[*]}): choose a device method"
      exit 2
    fi ;;
  *) echo "unknown wipe method $method"; exit 2 ;;
esac
customer_account "$user"
if [ "$account" = refused ]; then
  echo "$why: the customer's files cannot be told from the node's. Set the node's customer login to the customer's own account"
  exit 10
fi

# 1. the order's units
for unit in "${TRAINYARD_ORDER_UNITS[@]}"; do
  if command -v systemctl >/dev/null 2>&1 && systemctl is-active --quiet "$unit"; then
    systemctl stop "$unit"
    echo "stopped $unit"
  fi
  if command -v systemctl >/dev/null 2>&1; then systemctl disable "$unit" >/dev/null 2>&1 || true; fi
  if [ -e "$root/etc/systemd/system/$unit" ]; then
    rm -f "$root/etc/systemd/system/$unit"
    echo "removed unit $unit"
  fi
done
if [ -z "$root" ] && [ -d /run/systemd/system ]; then systemctl daemon-reload; fi

# 2. the customer's processes and what would start them again
if [ "$account" = customer ]; then
  end_customer_processes "$user"
  echo "no process of $user runs"
else
  echo "no account ${user:-(none given)} on this node: no home, processes or crontab to remove"
fi

# 3. the order's files
for dir in "$root/etc/trainyard" "$root/opt/trainyard/bin"; do
  if [ -d "$dir" ] && [ ! -L "$dir" ]; then
    find "$dir" -mindepth 1 -delete
    echo "emptied $dir"
  fi
done

# 4. home and the customer's files elsewhere
if [ "$account" = customer ]; then
  find "$home" -mindepth 1 -xdev -delete
  if [ -d /etc/skel ]; then
    cp -a /etc/skel/. "$home"/
    chown -R "$user": "$home"
  fi
  echo "emptied $home (the defaults of /etc/skel copied back)"
  for dir in $(shared_writable); do
    if [ -d "$dir" ]; then walk "$dir" -ignore_readdir_race -mindepth 1 -xdev -user "$uid" -delete; fi
  done
  echo "removed the files of $user in $(shared_writable)"
fi

# 5. the data
reads_zero() {  # the first and the last 4 MiB of the device read back as zeros
  local dev=$1 size n
  size=$(blockdev --getsize64 "$dev")
  n=$(( size < 4194304 ? size : 4194304 ))
  cmp -s -n "$n" "$dev" /dev/zero || return 1
  cmp -s -n "$n" <(dd if="$dev" bs=1M skip=$(( size - n )) count="$n" iflag=skip_bytes,count_bytes \
    status=none) /dev/zero
}

if [ "${#devices[@]}" -eq 0 ] && mountpoint -q "$data"; then
  echo "$data is a mount ($(findmnt -rno SOURCE -T "$data" | head -n 1)) but no data device is recorded: declare it on the node, then retry"
  exit 5
fi
if mountpoint -q "$data"; then
  if ! umount "$data"; then
    echo "$data is still in use: find what holds it (fuser -vm $data), then retry"
    exit 5
  fi
  echo "unmounted $data"
fi
if [ "${#devices[@]}" -gt 0 ]; then
  for tool in lsblk findmnt umount blkdiscard blockdev cmp; do
    command -v "$tool" >/dev/null 2>&1 || { echo "$tool not found: cannot wipe the data devices"; exit 5; }
  done
  for dev in "${devices[@]}"; do
    lsblk -nd "$dev" >/dev/null 2>&1 || { echo "$dev is not a block device on this node: check the node's recorded devices"; exit 5; }
    while read -r name; do
      if target=$(findmnt -rno TARGET -S "$name" 2>/dev/null | head -n 1) && [ -n "$target" ]; then
        echo "$dev ($name) is mounted at $target: not a data device of this order; nothing was wiped"
        exit 5
      fi
      if swapon --show=NAME --noheadings 2>/dev/null | grep -qx "$name"; then
        echo "$dev ($name) is swap: not a data device; nothing was wiped"
        exit 5
      fi
    done < <(lsblk -nrpo NAME "$dev" 2>/dev/null)
  done
  for dev in "${devices[@]}"; do
    release_device "$dev"
    case "$method" in
      discard) blkdiscard -f "$dev" ;;
      zero) blkdiscard -z -f "$dev" ;;
      secure_erase)
        command -v nvme >/dev/null 2>&1 || { echo "nvme not found: install nvme-cli for secure erase"; exit 5; }
        nvme format "$dev" --ses=1 --force ;;
    esac
    if reads_zero "$dev"; then
      echo "wiped $dev ($method); it reads back zeros"
    else
      echo "$dev does not read back zeros after $method: overwriting it with zeros"
      blkdiscard -z -f "$dev"
      reads_zero "$dev" || { echo "$dev still holds data after overwriting"; exit 6; }
      echo "wiped $dev (zeros written)"
    fi
  done
fi
if [ -d "$data" ] && [ ! -L "$data" ]; then
  find "$data" -mindepth 1 -xdev -delete
  if [ "$(id -u)" = 0 ]; then chown 0:0 "$data"; fi  # the next tenant's access step gives it away
  echo "emptied $data"
fi
echo "sanitised"
