"""The first-boot configuration an imaging engine (Ironic's configdrive, MAAS's user_data) hands
the node: Trainyard's management user with its key, the hostname, no password login. Customers'
keys are added later by the access step, never here."""

from __future__ import annotations

from collections.abc import Sequence

import yaml
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey


def render_user_data(*, hostname: str, management_user: str,
                     management_keys: Sequence[str],
                     host_key: tuple[str, str] | None = None) -> str:
    """``#cloud-config`` text. A key list that is empty, or a key that is not one OpenSSH line,
    is a ValueError: a node imaged without Trainyard's key could never be configured.

    ``host_key`` (OpenSSH private key text, public key line): the SSH host key the installed
    system presents, made by the caller so it can pin the public half before the first
    connection (cloud-init drops the image's keys and generates none of its own)."""
    keys = [key.strip() for key in management_keys if key.strip()]
    if not keys:
        raise ValueError("no management SSH public key: set the driver's private key file")
    for key in keys:
        if "\n" in key or len(key.split()) < 2:
            raise ValueError(f"not an OpenSSH public key line: {key[:40]!r}")
    if not hostname or not management_user:
        raise ValueError("a hostname and a management user are needed")
    config = {
        "hostname": hostname,
        "preserve_hostname": False,
        "ssh_pwauth": False,
        "disable_root": management_user != "root",
        "users": [{
            "name": management_user,
            "lock_passwd": True,
            "shell": "/bin/bash",
            "sudo": "ALL=(ALL) NOPASSWD:ALL",
            "ssh_authorized_keys": keys,
        }],
    }
    if host_key is not None:
        private, public = host_key
        kind = {"ssh-ed25519": "ed25519", "ssh-rsa": "rsa",
                "ecdsa-sha2-nistp256": "ecdsa"}.get(public.split()[0] if public.split() else "")
        if kind is None or "PRIVATE KEY" not in private:
            raise ValueError("host_key must be (OpenSSH private key, 'ssh-ed25519 AAAA…' line)")
        config["ssh_deletekeys"] = True
        config["ssh_genkeytypes"] = []
        config["ssh_keys"] = {f"{kind}_private": private, f"{kind}_public": public.strip()}
    return "#cloud-config\n" + yaml.safe_dump(config, sort_keys=False)


def new_host_key() -> tuple[str, str]:
    """A fresh ed25519 host key for an install: (OpenSSH private key text, public key line)."""
    key = Ed25519PrivateKey.generate()
    private = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.OpenSSH,
                                serialization.NoEncryption()).decode()
    public = key.public_key().public_bytes(serialization.Encoding.OpenSSH,
                                           serialization.PublicFormat.OpenSSH).decode()
    return private, public
