import pytest
from django.core.exceptions import ImproperlyConfigured

from portal.env import env_bool, env_int, env_list, env_secret, env_str


def test_env_bool_reads_common_spellings(monkeypatch):
    monkeypatch.setenv("FLAG", "Yes")
    assert env_bool("FLAG") is True
    monkeypatch.setenv("FLAG", "0")
    assert env_bool("FLAG", default=True) is False


def test_env_bool_rejects_garbage(monkeypatch):
    monkeypatch.setenv("FLAG", "maybe")
    with pytest.raises(ImproperlyConfigured, match="FLAG='maybe' is not a boolean"):
        env_bool("FLAG")


def test_env_int_rejects_non_integers_and_values_below_minimum(monkeypatch):
    monkeypatch.setenv("PORT", "eighty")
    with pytest.raises(ImproperlyConfigured, match="not an integer"):
        env_int("PORT", 1)
    monkeypatch.setenv("PORT", "-5")
    with pytest.raises(ImproperlyConfigured, match="must be at least 1"):
        env_int("PORT", 1, minimum=1)
    monkeypatch.setenv("PORT", "8080")
    assert env_int("PORT", 1, minimum=1) == 8080


def test_env_str_without_default_must_be_set(monkeypatch):
    monkeypatch.delenv("MISSING_THING", raising=False)
    with pytest.raises(ImproperlyConfigured, match="MISSING_THING must be set"):
        env_str("MISSING_THING")


def test_env_secret_reads_file(monkeypatch, tmp_path):
    secret = tmp_path / "secret"
    secret.write_text("s3cr3t\n")
    monkeypatch.setenv("TOKEN_FILE", str(secret))
    assert env_secret("TOKEN") == "s3cr3t"
    monkeypatch.setenv("TOKEN_FILE", str(tmp_path / "nope"))
    with pytest.raises(ImproperlyConfigured, match="cannot be read"):
        env_secret("TOKEN")


def test_env_list_splits_and_strips(monkeypatch):
    monkeypatch.setenv("HOSTS", " a.example , b.example,, ")
    assert env_list("HOSTS") == ["a.example", "b.example"]


def test_env_float_rejects_non_numbers_and_values_below_minimum(monkeypatch):
    from portal.env import env_float

    monkeypatch.setenv("SCALE", "fast")
    with pytest.raises(ImproperlyConfigured, match="SCALE='fast' is not a number"):
        env_float("SCALE", 1.0)
    monkeypatch.setenv("SCALE", "-0.5")
    with pytest.raises(ImproperlyConfigured, match="must be at least 0"):
        env_float("SCALE", 1.0, minimum=0.0)
    monkeypatch.setenv("SCALE", "0.25")
    assert env_float("SCALE", 1.0, minimum=0.0) == 0.25


def test_env_file_reads_the_named_file_or_gives_none(monkeypatch, tmp_path):
    from portal.env import env_file

    monkeypatch.delenv("SOME_SECRET_FILE", raising=False)
    assert env_file("SOME_SECRET_FILE") is None
    monkeypatch.setenv("SOME_SECRET_FILE", "")
    assert env_file("SOME_SECRET_FILE") is None
    secret = tmp_path / "secret"
    secret.write_text("s3cret\n")
    monkeypatch.setenv("SOME_SECRET_FILE", str(secret))
    assert env_file("SOME_SECRET_FILE") == "s3cret"
    monkeypatch.setenv("SOME_SECRET_FILE", str(tmp_path / "missing"))
    with pytest.raises(ImproperlyConfigured, match="SOME_SECRET_FILE=.* cannot be read"):
        env_file("SOME_SECRET_FILE")
