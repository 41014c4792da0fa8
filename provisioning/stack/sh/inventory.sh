#!/usr/bin/env bash
# What a tenant could leave on a node, one line each, for the hand-back attestation (and, on a
# clean node, its baseline): files under the Trainyard and data directories and in the login
# user's home, the user's files where every account may write, its processes, crontab, at jobs
# and lingering user manager; on a real node also every account, every crontab and every
# listening TCP socket. The portal compares the lines with the node's baseline
# (provisioning/inventory/handback.py). find never follows a symbolic link: a link is listed as itself; a
# file that goes away while it walks (another process's temporary directory) is not an error
# (walk).
#   file PATH | proc USER COMMAND | crontab USER | atjob USER | linger USER | user NAME | listen PROTO ADDRESS
# A declared test host (TRAINYARD_TEST_HOST=1) shares its machine with the test runner: its
# accounts, crontabs and sockets are the runner's, so only the login user's own are listed.
# Environment: TRAINYARD_LOGIN_USER; TRAINYARD_TEST_HOST; TRAINYARD_ROOT (tests: a scratch root).
set -euo pipefail

root="${TRAINYARD_ROOT:-}"
user="${TRAINYARD_LOGIN_USER:-}"
test_host="${TRAINYARD_TEST_HOST:-0}"

list_files() {
  local dir
  for dir in "$@"; do
    [ -e "$dir" ] || continue
    walk "$dir" -ignore_readdir_race -mindepth 1 -xdev -printf 'file %p\n'
  done
}

list_files "$root/etc/trainyard" "$root/data" "$root/opt/trainyard/bin"
customer_account "$user"
if [ "$account" = customer ]; then
  list_files "$home"
  for dir in $(shared_writable); do
    if [ -d "$dir" ]; then walk "$dir" -ignore_readdir_race -mindepth 1 -xdev -user "$uid" -printf 'file %p\n'; fi
  done
  pgrep -u "$user" -l 2>/dev/null | while read -r _ comm; do echo "proc $user $comm"; done || true
  if [ -e "/var/spool/cron/crontabs/$user" ]; then echo "crontab $user"; fi
  if command -v atq >/dev/null 2>&1; then
    # atq fails when a job file goes away while it reads the queue (another account's atrm):
    # asked again it lists what is there; a third failure fails the listing.
    queue=$(atq 2>/dev/null || { sleep 1; atq 2>/dev/null; } || { sleep 1; atq; })
    awk -v u="$user" '$NF == u {print "atjob " u}' <<< "$queue" | sort -u
  fi
  if [ -e "/var/lib/systemd/linger/$user" ]; then echo "linger $user"; fi
fi
if [ "$test_host" = 1 ]; then
  exit 0
fi
cut -d: -f1 /etc/passwd | while read -r name; do echo "user $name"; done
if [ -d /var/spool/cron/crontabs ]; then
  walk /var/spool/cron/crontabs -ignore_readdir_race -mindepth 1 -maxdepth 1 -printf 'crontab %f\n'
fi
if [ -d /var/lib/systemd/linger ]; then
  walk /var/lib/systemd/linger -ignore_readdir_race -mindepth 1 -maxdepth 1 -printf 'linger %f\n'
fi
if command -v ss >/dev/null 2>&1; then
  ss -Hltn | awk '{print "listen tcp " $4}' | sort -u
fi
