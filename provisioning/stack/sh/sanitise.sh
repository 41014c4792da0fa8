#!/usr/bin/env bash
# Hand-back: removes everything a tenant had on the node, after its checkpoints were copied.
#  1. the order's units (checkpoint sync timer, TensorBoard): stopped, their files removed;
#  2. the login user's processes, crontab and lingering user manager (again: nothing may run);
#  3. all of /etc/trainyard (env, launch configs, keys, bucket credentials) and the order's
#     tools in /opt/trainyard/bin;
#  4. the login user's home (contents removed, /etc/skel copied back) and temporary files;
#  5. the data: the recorded data devices are unmounted and wiped by the node's wipe method
#     (discard: blkdiscard; zero: blkdiscard -z; secure_erase: nvme format --ses=1), each checked
#     to read back zeros where it was sampled, else overwritten with zeros; a node without data
#     devices (method "files") has its data directory's contents deleted.
# Root and the account Trainyard manages the node with are never the customer's: their homes
# and processes are left alone. The Trainyard runtimes (/opt/trainyard/venv, tools, nccl-tests)
# stay. Re-runnable: what is already gone is skipped.
# Environment: TRAINYARD_LOGIN_USER, TRAINYARD_WIPE_METHOD, TRAINYARD_DATA_DEVICES (space
# separated); TRAINYARD_ROOT (tests: a scratch root).
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

# 1. the order's units
for unit in trainyard-checkpoint-sync.timer trainyard-checkpoint-sync.service trainyard-tensorboard.service; do
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
customer=0
home=""
if [ -n "$user" ] && uid=$(id -u "$user" 2>/dev/null) && [ "$uid" != 0 ] && [ "$user" != "$(id -un)" ]; then
  customer=1
  home=$(getent passwd "$user" | cut -d: -f6)
fi
if [ "$customer" = 1 ]; then
  if command -v crontab >/dev/null 2>&1 && crontab -l -u "$user" >/dev/null 2>&1; then
    crontab -r -u "$user"
    echo "crontab of $user removed"
  fi
  if command -v loginctl >/dev/null 2>&1; then loginctl disable-linger "$user" 2>/dev/null || true; fi
  pkill -KILL -u "$user" || true
  tries=0
  while pgrep -u "$user" >/dev/null 2>&1; do
    tries=$((tries + 1))
    if [ "$tries" -gt 20 ]; then
      echo "processes of $user survive pkill -KILL"
      exit 9
    fi
    sleep 0.5
    pkill -KILL -u "$user" || true
  done
  echo "no process of $user runs"
elif [ -n "$user" ]; then
  echo "$user is not a customer account on this node (absent, root or Trainyard's own): its home and processes are left alone"
fi

# 3. the order's files
if [ -d "$root/etc/trainyard" ]; then
  find "$root/etc/trainyard" -mindepth 1 -delete
  echo "removed the order's files in /etc/trainyard (env, configs, keys, bucket credentials)"
fi
if [ -d "$root/opt/trainyard/bin" ]; then
  find "$root/opt/trainyard/bin" -mindepth 1 -delete
  echo "removed the order's tools in /opt/trainyard/bin"
fi

# 4. home and temporary files
if [ "$customer" = 1 ]; then
  if [ -n "$home" ] && [ "$home" != / ] && [ -d "$home" ]; then
    find "$home" -mindepth 1 -xdev -delete
    if [ -d /etc/skel ]; then
      cp -a /etc/skel/. "$home"/
      chown -R "$user": "$home"
    fi
    echo "emptied $home (the defaults of /etc/skel copied back)"
  fi
  for tmp in /tmp /var/tmp /dev/shm; do
    [ -d "$tmp" ] || continue
    find "$tmp" -mindepth 1 -xdev -user "$user" -delete 2>/dev/null || true
  done
  echo "removed the temporary files of $user"
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

if mountpoint -q "$data"; then
  if command -v fuser >/dev/null 2>&1; then fuser -km "$data" >/dev/null 2>&1 || true; fi
  umount "$data"
  echo "unmounted $data"
fi
if [ "${#devices[@]}" -gt 0 ]; then
  for tool in lsblk findmnt umount blkdiscard blockdev cmp; do
    command -v "$tool" >/dev/null 2>&1 || { echo "$tool not found: cannot wipe the data devices"; exit 5; }
  done
  for dev in "${devices[@]}"; do
    lsblk -nd "$dev" >/dev/null 2>&1 || { echo "$dev is not a block device on this node: check the node's recorded devices"; exit 5; }
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
if [ -d "$data" ]; then
  find "$data" -mindepth 1 -xdev -delete
  if [ "$(id -u)" = 0 ]; then chown 0:0 "$data"; fi  # the next tenant's access step gives it away
  echo "emptied $data"
fi
echo "sanitised"
