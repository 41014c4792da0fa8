#!/usr/bin/env bash
# shellcheck shell=bash disable=SC2034,SC2154
# Whether the login user is an account the hand-back may treat as the customer's: it exists, is
# not root nor the account Trainyard manages the node with (the sudo caller, else the user running
# the script), is a regular account (uid at least UID_MIN of /etc/login.defs, 1000 by default),
# and owns its home, which is a directory of its own (not /, not a mountpoint, and holds none of
# Trainyard's directories). Sets: account (absent | customer | refused), uid, home, why.
customer_account() {
  local user=$1 managing uid_min
  account=absent uid="" home="" why=""
  [ -n "$user" ] || return 0
  uid=$(id -u "$user" 2>/dev/null) || return 0
  managing="${SUDO_USER:-$(id -un)}"
  uid_min=$(awk '$1 == "UID_MIN" {print $2}' /etc/login.defs 2>/dev/null)
  home=$(getent passwd "$user" | cut -d: -f6)
  account=refused
  if [ "$uid" = 0 ] || [ "$user" = root ]; then
    why="$user is root"
  elif [ "$user" = "$managing" ]; then
    why="$user is the account Trainyard manages this node with"
  elif [ "$uid" -lt "${uid_min:-1000}" ]; then
    why="$user is a system account (uid $uid below ${uid_min:-1000})"
  elif [ -z "$home" ] || [ "$home" = / ] || [ ! -d "$home" ] || [ -L "$home" ] \
      || [ "$(stat -c %u "$home")" != "$uid" ] || mountpoint -q "$home"; then
    why="the home of $user ($home) is not a directory of its own"
  else
    case "$root/" in "$home"/*) why="the home of $user ($home) holds Trainyard's directories" ;; esac
    case "$home/" in "$root/data/"*|"$root/etc/"*|"$root/opt/"*) why="the home of $user ($home) is inside Trainyard's directories" ;; esac
  fi
  [ -n "$why" ] || account=customer
}

# Where any account can leave files outside its home: searched for the customer's files.
shared_writable() {
  echo /tmp /var/tmp /dev/shm /var/crash /run/lock /dev/mqueue /var/mail /var/spool/mail
}
