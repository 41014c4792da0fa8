#!/usr/bin/env bash
# Hand-back, first step: the customer's access ends the moment termination starts. Removes the
# Trainyard-managed keys (the only keys sshd reads for the login user: stack/access.py), makes a
# password the customer may have set unusable, removes the user's crontab, at jobs and lingering
# user manager (they would start processes again), then ends the user's sessions and every
# process it runs, and checks none is left. A login user that is root, Trainyard's own account or
# a system account is refused (exit 10): its access cannot be ended without breaking the node.
# Environment: TRAINYARD_LOGIN_USER; TRAINYARD_ROOT (tests: a scratch root).
set -euo pipefail

root="${TRAINYARD_ROOT:-}"
user="${TRAINYARD_LOGIN_USER:?TRAINYARD_LOGIN_USER is not set}"
rm -f "$root/etc/trainyard/authorized_keys"
echo "customer SSH keys removed"
customer_account "$user"
case "$account" in
  absent) echo "no account $user on this node: no session to end"; exit 0 ;;
  refused)
    echo "$why: the customer's access cannot be ended safely. Set the node's customer login to the customer's own account"
    exit 10 ;;
esac
if command -v usermod >/dev/null 2>&1; then
  usermod -p '*' "$user"  # no password login; key login (none left) is unaffected
  echo "password login of $user disabled"
fi
end_customer_processes "$user"
echo "sessions and processes of $user ended"
