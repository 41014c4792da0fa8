import pytest
from cryptography.fernet import Fernet

from portal.core.crypto import decrypt, encrypt


def test_round_trip_and_ciphertext_hides_the_secret():
    token = encrypt("AKIA-secret-key")
    assert "AKIA" not in token
    assert decrypt(token) == "AKIA-secret-key"


def test_wrong_key_gives_a_clear_error(settings):
    token = encrypt("x")
    settings.FIELD_ENCRYPTION_KEY = Fernet.generate_key().decode()
    with pytest.raises(ValueError, match="FIELD_ENCRYPTION_KEY does not match"):
        decrypt(token)
