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


def test_encrypted_field_stores_ciphertext_and_reads_plaintext():
    from portal.core.crypto import EncryptedTextField

    field = EncryptedTextField()
    stored = field.get_prep_value("s3-secret-key")
    assert "s3-secret-key" not in stored
    assert field.from_db_value(stored, None, None) == "s3-secret-key"
    assert field.get_prep_value(None) is None and field.from_db_value(None, None, None) is None
