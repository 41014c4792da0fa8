"""The customer's SSH keys on a node: ``sh/authorized_keys.sh`` installs them as
``$TRAINYARD_ROOT/etc/trainyard/authorized_keys`` (the file ``sh/revoke_access.sh`` removes),
from the environment built here.

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
from dataclasses import dataclass

from provisioning.stack.paths import AUTHORIZED_KEYS, CHECKPOINT_DIR, DATA
from provisioning.stack.shell import node_script

KEYS_PATH = AUTHORIZED_KEYS
SSHD_DROPIN = "/etc/ssh/sshd_config.d/60-trainyard.conf"


def sshd_dropin(login_user: str) -> str:
    return (f"# Managed by Trainyard: {login_user} logs in with the portal's keys only.\n"
            f"Match User {login_user}\n    AuthorizedKeysFile {KEYS_PATH}\nMatch all\n")
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


def authorized_keys_script() -> str:
    return node_script("authorized_keys")


def authorized_keys_env(keys: list[KeyLine], *, order_reference: str, login_user: str) -> dict[str, str]:
    """What ``sh/authorized_keys.sh`` installs; ValueError for anything but single key lines."""
    for key in keys:  # validated when added
        if "\n" in key.line or len(key.line.split()) != 2:
            raise ValueError(f"not a single key line: {key.line[:40]!r}")
    return {"TRAINYARD_LOGIN_USER": login_user,
            "TRAINYARD_AUTHORIZED_KEYS": authorized_keys_text(keys, order_reference=order_reference),
            "TRAINYARD_KEYS_PATH": KEYS_PATH, "TRAINYARD_DATA": DATA,
            "TRAINYARD_CHECKPOINT_DIR": CHECKPOINT_DIR, "TRAINYARD_SSHD_DROPIN": SSHD_DROPIN,
            "TRAINYARD_SSHD_DROPIN_TEXT": sshd_dropin(login_user)}
