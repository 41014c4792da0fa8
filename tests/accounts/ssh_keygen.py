"""Fresh OpenSSH key pairs for tests, made with `cryptography` (the same library the portal
validates with, so the lines are what `ssh-keygen` writes: type, base64, comment)."""

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa

CURVES = {"ecdsa-sha2-nistp256": ec.SECP256R1, "ecdsa-sha2-nistp384": ec.SECP384R1,
          "ecdsa-sha2-nistp521": ec.SECP521R1}


def private_key(kind: str, *, bits: int = 2048):
    if kind == "ssh-ed25519":
        return ed25519.Ed25519PrivateKey.generate()
    if kind in CURVES:
        return ec.generate_private_key(CURVES[kind]())
    if kind == "ssh-rsa":
        return rsa.generate_private_key(public_exponent=65537, key_size=bits)
    raise ValueError(kind)


def public_line(key, comment: str = "alice@laptop") -> str:
    line = key.public_key().public_bytes(serialization.Encoding.OpenSSH,
                                         serialization.PublicFormat.OpenSSH).decode()
    return f"{line} {comment}" if comment else line


def private_text(key) -> str:
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.OpenSSH,
                             serialization.NoEncryption()).decode()


def new_public_key(kind: str = "ssh-ed25519", comment: str = "alice@laptop", **kwargs) -> str:
    return public_line(private_key(kind, **kwargs), comment)
