"""The customer's SSH keys on a node: a script that installs them as
``$TRAINYARD_ROOT/etc/trainyard/authorized_keys`` (the file ``sh/revoke_access.sh`` removes).

The file is replaced atomically (written next to it, then renamed) with mode 600, owned by the
login user on a real node: sshd reads a user's authorized keys with that user's rights, so a
root-only file would lock the customer out. On a real node (no ``TRAINYARD_ROOT``) an sshd
drop-in makes this file the login user's *only* ``AuthorizedKeysFile`` (a ``Match User`` block:
``~/.ssh/authorized_keys`` of that user is not read, so a key added there by hand cannot outlive
its removal in the portal or the termination's revoke; other accounts, the one the pipeline
manages the node with included, keep their own keys). The login user must not be that
management account (exit 8). sshd checks its configuration (``sshd -T -C user=…`` must show
exactly this file) and is reloaded when the drop-in changed. Under a scratch root (tests) sshd's
configuration is left alone. The data directory (``/data`` and its checkpoint directory) is given
to the login user, who trains there without root; the hand-back gives it back to root.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass

from provisioning.stack.paths import AUTHORIZED_KEYS, CHECKPOINT_DIR, DATA

KEYS_PATH = AUTHORIZED_KEYS
SSHD_DROPIN = "/etc/ssh/sshd_config.d/60-trainyard.conf"


def sshd_dropin(login_user: str) -> str:
    return (f"# Managed by Trainyard: {login_user} logs in with the portal's keys only.\n"
            f"Match User {login_user}\n    AuthorizedKeysFile {KEYS_PATH}\nMatch all\n")
_DELIMITER = "TRAINYARD_AUTHORIZED_KEYS"
_UNSAFE_COMMENT = re.compile(r"[^A-Za-z0-9 ._@:+()-]")


@dataclass(frozen=True)
class KeyLine:
    """One key to install: the validated ``type base64`` line and a label for its comment."""

    line: str
    label: str


def authorized_keys_text(keys: list[KeyLine], *, order_reference: str) -> str:
    header = (f"# Managed by Trainyard for order {order_reference}: edits here are replaced at "
              f"the next key sync. Add or remove keys in the portal.\n")
    return header + "".join(f"{k.line} {_comment(k.label)}\n" for k in keys)


def _comment(label: str) -> str:
    return _UNSAFE_COMMENT.sub("_", " ".join(label.split()))[:120] or "trainyard"


def authorized_keys_script(keys: list[KeyLine], *, order_reference: str, login_user: str) -> str:
    for key in keys:  # validated when added; a line that could end the here-document is refused
        if "\n" in key.line or key.line.strip() == _DELIMITER or len(key.line.split()) != 2:
            raise ValueError(f"not a single key line: {key.line[:40]!r}")
    user = shlex.quote(login_user)
    return f"""#!/bin/sh
set -eu
root="${{TRAINYARD_ROOT:-}}"
dir="$root/etc/trainyard"
target="$dir/authorized_keys"
mkdir -p "$dir"
tmp=$(mktemp "$dir/.authorized_keys.XXXXXX")
trap 'rm -f "$tmp"' EXIT
cat > "$tmp" <<'{_DELIMITER}'
{authorized_keys_text(keys, order_reference=order_reference)}{_DELIMITER}
chmod 600 "$tmp"
if id {user} >/dev/null 2>&1; then
  chown {user} "$tmp"
fi
mv -f "$tmp" "$target"
trap - EXIT
echo "installed {len(keys)} SSH key(s) in $target"
if uid=$(id -u {user} 2>/dev/null) && [ "$uid" != 0 ] && [ "${{SUDO_USER:-$(id -un)}}" != {user} ]; then
  # Root acts here on directories the customer may own: never through a link they left.
  mkdir -p "$root{DATA}"
  if [ -L "$root{CHECKPOINT_DIR}" ]; then rm -f "$root{CHECKPOINT_DIR}"; fi
  mkdir -p "$root{CHECKPOINT_DIR}"
  chown -h {user}: "$root{DATA}" "$root{CHECKPOINT_DIR}"
  echo "{DATA} and {CHECKPOINT_DIR} belong to {login_user}"
fi
if [ -n "$root" ]; then
  echo "scratch root $root: sshd configuration left alone"
  exit 0
fi
if [ "${{SUDO_USER:-$(id -un)}}" = {user} ]; then
  echo "the login user {login_user} is the account Trainyard manages this node with: its own keys"
  echo "would stop working. Set the node's login_user driver option to the customer's account."
  exit 8
fi
dropin={SSHD_DROPIN}
want={shlex.quote(sshd_dropin(login_user))}
if [ -f "$dropin" ] && [ "$(cat "$dropin")" = "$want" ]; then
  echo "sshd already reads {KEYS_PATH} (only) for {login_user}"
  exit 0
fi
mkdir -p "$(dirname "$dropin")"
printf '%s\\n' "$want" > "$dropin.tmp"
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
  if effective=$("$sshd_bin" -T -C user={user},host=localhost,addr=127.0.0.1 2>/dev/null); then
    if ! printf '%s\\n' "$effective" | grep -qix "authorizedkeysfile {KEYS_PATH}"; then
      echo "sshd does not read {KEYS_PATH} alone for {login_user}:"
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
echo "sshd reads {KEYS_PATH}"
"""
