#!/usr/bin/env bash
# The customer's SSH keys on a node (provisioning/stack/access.py says why each part is there):
# writes TRAINYARD_AUTHORIZED_KEYS as $TRAINYARD_ROOT$TRAINYARD_KEYS_PATH (mode 600, owned by the
# login user, replaced atomically), gives the data and checkpoint directories to the login user
# (never through a link), and on a real node makes that file the login user's only
# AuthorizedKeysFile through an sshd drop-in, checked by sshd and reloaded.
# Exit 8: the login user is the account Trainyard manages the node with; 6: sshd rejected its
# configuration with the drop-in; 7: sshd would not read the file for the login user.
# Environment: TRAINYARD_LOGIN_USER, TRAINYARD_AUTHORIZED_KEYS (the file's text),
# TRAINYARD_KEYS_PATH, TRAINYARD_DATA, TRAINYARD_CHECKPOINT_DIR, TRAINYARD_SSHD_DROPIN and
# TRAINYARD_SSHD_DROPIN_TEXT; TRAINYARD_ROOT (tests: a scratch root).
set -euo pipefail

root="${TRAINYARD_ROOT:-}"
user="${TRAINYARD_LOGIN_USER:?TRAINYARD_LOGIN_USER is not set}"
keys_path="${TRAINYARD_KEYS_PATH:?TRAINYARD_KEYS_PATH is not set}"
data="${TRAINYARD_DATA:?TRAINYARD_DATA is not set}"
checkpoints="${TRAINYARD_CHECKPOINT_DIR:?TRAINYARD_CHECKPOINT_DIR is not set}"
dropin="${TRAINYARD_SSHD_DROPIN:?TRAINYARD_SSHD_DROPIN is not set}"
want="${TRAINYARD_SSHD_DROPIN_TEXT:?TRAINYARD_SSHD_DROPIN_TEXT is not set}"
target="$root$keys_path"
dir=$(dirname "$target")
mkdir -p "$dir"
tmp=$(mktemp "$dir/.authorized_keys.XXXXXX")
trap 'rm -f "$tmp"' EXIT
printf '%s' "${TRAINYARD_AUTHORIZED_KEYS:-}" > "$tmp"
chmod 600 "$tmp"
if id "$user" >/dev/null 2>&1; then
  chown "$user" "$tmp"
fi
mv -f "$tmp" "$target"
trap - EXIT
echo "installed $(grep -cv '^#' "$target" || true) SSH key(s) in $target"
me="${SUDO_USER:-$(id -un)}"
if uid=$(id -u "$user" 2>/dev/null) && [ "$uid" != 0 ] && [ "$me" != "$user" ]; then
  # Root acts here on directories the customer may own: never through a link they left.
  mkdir -p "$root$data"
  if [ -L "$root$checkpoints" ]; then rm -f "$root$checkpoints"; fi
  mkdir -p "$root$checkpoints"
  chown -h "$user:" "$root$data" "$root$checkpoints"
  echo "$data and $checkpoints belong to $user"
fi
if [ -n "$root" ]; then
  echo "scratch root $root: sshd configuration left alone"
  exit 0
fi
if [ "$me" = "$user" ]; then
  echo "the login user $user is the account Trainyard manages this node with: its own keys"
  echo "would stop working. Set the node's login_user driver option to the customer's account."
  exit 8
fi
if [ -f "$dropin" ] && [ "$(cat "$dropin")" = "$want" ]; then
  echo "sshd already reads $keys_path (only) for $user"
  exit 0
fi
mkdir -p "$(dirname "$dropin")"
printf '%s\n' "$want" > "$dropin.tmp"
mv -f "$dropin.tmp" "$dropin"
sshd_bin=$(command -v sshd || echo /usr/sbin/sshd)
if [ -x "$sshd_bin" ]; then
  if ! "$sshd_bin" -t; then
    rm -f "$dropin"
    echo "sshd rejected its configuration with the Trainyard drop-in; drop-in removed"
    exit 6
  fi
  # The effective configuration (needs root); a main config that never includes the drop-in,
  # or sets AuthorizedKeysFile before it, would leave the customer locked out: say so.
  if effective=$("$sshd_bin" -T -C "user=$user,host=localhost,addr=127.0.0.1" 2>/dev/null); then
    if ! printf '%s\n' "$effective" | grep -qix "authorizedkeysfile $keys_path"; then
      echo "sshd does not read $keys_path alone for $user:"
      echo "its main config lacks 'Include /etc/ssh/sshd_config.d/*.conf' or matches the user first"
      exit 7
    fi
  fi
fi
if command -v systemctl >/dev/null 2>&1 && systemctl is-active --quiet ssh; then
  systemctl reload ssh
elif command -v systemctl >/dev/null 2>&1 && systemctl is-active --quiet sshd; then
  systemctl reload sshd
elif [ -f /run/sshd.pid ]; then
  kill -HUP "$(cat /run/sshd.pid)"
else
  echo "no running sshd found to reload"
fi
echo "sshd reads $keys_path"
