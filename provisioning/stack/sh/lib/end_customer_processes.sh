#!/usr/bin/env bash
# shellcheck shell=bash
# Ends what the customer runs and what would start it again: crontab, at jobs, the lingering
# user manager, sessions, processes (checked: exit 9 when one survives pkill -KILL).
end_customer_processes() {
  local user=$1 tries=0 job
  if command -v crontab >/dev/null 2>&1 && crontab -l -u "$user" >/dev/null 2>&1; then
    crontab -r -u "$user"
    echo "crontab of $user removed"
  fi
  if command -v atq >/dev/null 2>&1; then
    while read -r job _ _ _ _ owner; do
      if [ "$owner" = "$user" ]; then atrm "$job"; echo "at job $job of $user removed"; fi
    done < <(atq 2>/dev/null || true)
  fi
  if command -v loginctl >/dev/null 2>&1; then
    loginctl disable-linger "$user" 2>/dev/null || true
    loginctl terminate-user "$user" 2>/dev/null || true
  fi
  pkill -KILL -u "$user" || true
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
}
