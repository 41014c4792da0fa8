import re

from tests.conftest import REPO_ROOT


def test_env_example_documents_every_variable_settings_read():
    settings_source = (REPO_ROOT / "portal" / "settings.py").read_text()
    read = set(re.findall(r'env_\w+\(\s*"([A-Z_]+)"', settings_source))
    documented = set(re.findall(r"^([A-Z_]+)=", (REPO_ROOT / ".env.example").read_text(), re.M))
    assert read, "no env_* calls found: the pattern is out of date"
    assert read - documented == set()
