"""Reads one OpenSSH public key line as a customer pastes it (``~/.ssh/id_ed25519.pub``) and
says clearly what is wrong with anything else. The key itself is parsed by ``cryptography``'s
OpenSSH loader; this module only adds the rules and the messages. No Django here."""

from __future__ import annotations

import base64
import hashlib
from dataclasses import dataclass

from cryptography.exceptions import UnsupportedAlgorithm
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa
from cryptography.hazmat.primitives.serialization import load_ssh_public_key

MAX_INPUT_CHARS = 8192  # an RSA 16384-bit key line is ~2,800 characters
MIN_RSA_BITS = 2048
ACCEPTED = "ed25519, ecdsa (nistp256, nistp384, nistp521) or rsa (at least 2048 bits)"
KEY_TYPES = {
    "ssh-ed25519": "Ed25519",
    "ecdsa-sha2-nistp256": "ECDSA P-256",
    "ecdsa-sha2-nistp384": "ECDSA P-384",
    "ecdsa-sha2-nistp521": "ECDSA P-521",
    "ssh-rsa": "RSA",
}
_OTHER_TYPES = ("ssh-dss", "sk-ssh-ed25519@openssh.com", "sk-ecdsa-sha2-nistp256@openssh.com")
_CURVES = {"secp256r1": "ecdsa-sha2-nistp256", "secp384r1": "ecdsa-sha2-nistp384",
           "secp521r1": "ecdsa-sha2-nistp521"}


_PRIVATE_MARKERS = ("PRIVATE KEY", "PuTTY-User-Key-File", "b3BlbnNzaC1rZXktdjE")  # the last: openssh-key-v1
_ALL_TYPES = (*KEY_TYPES, *_OTHER_TYPES)


class InvalidPublicKey(ValueError):
    """The pasted text is not a key Trainyard installs; the message says why and what to do."""


def looks_private(text: str) -> bool:
    """Whether ``text`` holds (a piece of) a private key: refused, and never shown again."""
    return any(marker in (text or "") for marker in _PRIVATE_MARKERS)


def _is_key_blob(word: str) -> bool:
    """Whether ``word`` is the base64 data of an SSH public key (it names its own type)."""
    if len(word) < 32:
        return False
    try:
        blob = base64.b64decode(word, validate=True)
    except ValueError:
        return False
    length = int.from_bytes(blob[:4], "big")
    return _is_key_type(blob[4:4 + length].decode("latin-1"))


def _is_key_type(word: str) -> bool:
    """A key type OpenSSH writes, ours or another (certificates, security keys, DSA)."""
    return word in _ALL_TYPES or (word.startswith(("ssh-", "ecdsa-sha2-", "sk-"))
                                  and word.endswith("@openssh.com"))


def _another_key_in(comment: str) -> str:
    """The key type (or "key data") of a second key in what follows the first one, "" if none."""
    for word in comment.split():
        if _is_key_type(word):
            return word
        if _is_key_blob(word):
            return "key data"
    return ""


@dataclass(frozen=True)
class PublicKey:
    key_type: str  # "ssh-ed25519", "ecdsa-sha2-nistp256", … "ssh-rsa"
    bits: int
    line: str  # "<type> <base64>": no options, no comment
    comment: str
    fingerprint: str  # "SHA256:…", as `ssh-keygen -lf` prints it

    @property
    def label(self) -> str:
        name = KEY_TYPES[self.key_type]
        return f"{name} {self.bits}" if self.key_type == "ssh-rsa" else name


def fingerprint_sha256(blob: bytes) -> str:
    return "SHA256:" + base64.b64encode(hashlib.sha256(blob).digest()).decode().rstrip("=")


def parse_public_key(text: str) -> PublicKey:
    """The key in ``text`` (one line: type, base64, optional comment); InvalidPublicKey if not."""
    text = (text or "").strip()
    if not text:
        raise InvalidPublicKey("Paste a public key: the one line in your ~/.ssh/id_ed25519.pub.")
    if len(text) > MAX_INPUT_CHARS:
        raise InvalidPublicKey(f"That is {len(text):,} characters; a public key line is at most "
                               f"{MAX_INPUT_CHARS:,}. Paste only the .pub file's one line.")
    if looks_private(text):
        raise InvalidPublicKey("This is a private key: never paste it anywhere. Paste the public "
                               "key instead (the .pub file, one line starting with ssh-ed25519, "
                               "ecdsa-sha2-… or ssh-rsa), and treat this private key as exposed.")
    if "BEGIN SSH2 PUBLIC KEY" in text:
        raise InvalidPublicKey("This is an SSH2 (RFC 4716, PuTTY) public key: convert it with "
                               "`ssh-keygen -i -f key.pub` and paste the one line it prints.")
    if "\n" in text or "\r" in text:
        raise InvalidPublicKey("Paste one key on one line; add each further key separately.")
    fields = text.split(None, 2)
    key_type = fields[0]
    if key_type not in KEY_TYPES:
        if any(t in text.split()[1:] for t in (*KEY_TYPES, *_OTHER_TYPES)):
            raise InvalidPublicKey("Remove what comes before the key type (authorized_keys options "
                                   "such as from=… or command=…): paste the key alone; Trainyard "
                                   "installs it without options.")
        if key_type in _OTHER_TYPES:
            raise InvalidPublicKey(f"{key_type} keys are not accepted: use {ACCEPTED}.")
        raise InvalidPublicKey(f"This is not an OpenSSH public key (it should start with the key "
                               f"type, e.g. ssh-ed25519). Accepted: {ACCEPTED}.")
    if len(fields) < 2:
        raise InvalidPublicKey(f"The key data after {key_type} is missing: paste the whole line.")
    line = f"{key_type} {fields[1]}"
    try:
        blob = base64.b64decode(fields[1], validate=True)
        key = load_ssh_public_key(line.encode())
    except (ValueError, UnsupportedAlgorithm, TypeError):
        raise InvalidPublicKey(f"The key data is damaged or incomplete (not a valid "
                               f"{KEY_TYPES[key_type]} key): copy the whole line again.") from None
    bits = _check_strength(key_type, key)
    comment = fields[2].strip() if len(fields) > 2 else ""
    if second := _another_key_in(comment):
        raise InvalidPublicKey(f"This line holds more than one key ({second} follows the first "
                               f"key): paste one key per entry and add the other one separately. "
                               f"After a key only its comment may follow, e.g. you@laptop.")
    return PublicKey(key_type=key_type, bits=bits, line=line, comment=comment,
                     fingerprint=fingerprint_sha256(blob))


def _check_strength(key_type: str, key) -> int:
    if isinstance(key, ed25519.Ed25519PublicKey) and key_type == "ssh-ed25519":
        return 256
    if isinstance(key, ec.EllipticCurvePublicKey) and _CURVES.get(key.curve.name) == key_type:
        return key.curve.key_size
    if isinstance(key, rsa.RSAPublicKey) and key_type == "ssh-rsa":
        if key.key_size < MIN_RSA_BITS:
            raise InvalidPublicKey(f"This RSA key has {key.key_size} bits; RSA keys need at least "
                                   f"{MIN_RSA_BITS}. Make a new one with `ssh-keygen -t ed25519`.")
        return key.key_size
    raise InvalidPublicKey(f"The key data does not match its type {key_type}: copy the whole "
                           f"line again.")
