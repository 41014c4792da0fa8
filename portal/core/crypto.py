"""Encryption at rest for secrets (S3 keys, SSH keys, provider credentials)."""

from functools import cache

from cryptography.fernet import Fernet, InvalidToken
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.db import models


@cache
def _fernet(key: str) -> Fernet:
    try:
        return Fernet(key.encode())
    except ValueError as exc:
        raise ImproperlyConfigured(
            "FIELD_ENCRYPTION_KEY must be a urlsafe base64 32-byte key "
            "(python -c 'from cryptography.fernet import Fernet; print(Fernet.generate_key())')"
        ) from exc


def encrypt(plaintext: str) -> str:
    return _fernet(settings.FIELD_ENCRYPTION_KEY).encrypt(plaintext.encode()).decode()


def decrypt(token: str) -> str:
    try:
        return _fernet(settings.FIELD_ENCRYPTION_KEY).decrypt(token.encode()).decode()
    except InvalidToken as exc:
        raise ValueError("cannot decrypt: FIELD_ENCRYPTION_KEY does not match the stored value") from exc


class EncryptedTextField(models.TextField):
    """Stores Fernet ciphertext; Python code sees plaintext."""

    def from_db_value(self, value, expression, connection):
        return None if value is None else decrypt(value)

    def get_prep_value(self, value):
        value = super().get_prep_value(value)
        return None if value is None else encrypt(value)
