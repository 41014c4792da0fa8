"""The authorized_keys installer: what it writes under a scratch root (run for real with sh),
that it refuses anything but single key lines, and that every variant passes shellcheck."""

import os
import shutil
import stat
import subprocess

import pytest

from provisioning.stack.access import KeyLine, authorized_keys_script, authorized_keys_text
from tests.accounts.ssh_keygen import new_public_key
from tests.conftest import missing_service


def _line() -> str:
    return " ".join(new_public_key().split()[:2])


def _run(script: str, root) -> subprocess.CompletedProcess:
    return subprocess.run(["sh", "-c", script], capture_output=True, text=True,
                          env={**os.environ, "TRAINYARD_ROOT": str(root)})


def test_it_replaces_the_file_with_mode_600_and_leaves_sshd_alone_under_a_scratch_root(tmp_path):
    first, second = _line(), _line()
    target = tmp_path / "etc/trainyard/authorized_keys"
    done = _run(authorized_keys_script([KeyLine(first, "laptop (alice)")], order_reference="O-1",
                                       login_user="ubuntu"), tmp_path)
    assert done.returncode == 0, done.stderr
    assert stat.S_IMODE(target.stat().st_mode) == 0o600
    assert f"{first} laptop (alice)\n" in target.read_text()
    assert "sshd configuration left alone" in done.stdout
    done = _run(authorized_keys_script([KeyLine(second, "ci")], order_reference="O-1",
                                       login_user="ubuntu"), tmp_path)
    assert done.returncode == 0, done.stderr
    assert first not in target.read_text() and second in target.read_text()
    assert sorted(p.name for p in target.parent.iterdir()) == ["authorized_keys"]  # no temp left


def test_no_keys_leave_an_empty_file_that_opens_nothing(tmp_path):
    done = _run(authorized_keys_script([], order_reference="O-2", login_user="ubuntu"), tmp_path)
    assert done.returncode == 0 and "installed 0 SSH key(s)" in done.stdout
    text = (tmp_path / "etc/trainyard/authorized_keys").read_text()
    assert [line for line in text.splitlines() if not line.startswith("#")] == []


def test_comments_cannot_break_out_of_the_line():
    text = authorized_keys_text([KeyLine(_line(), "x\ncommand=\"rm -rf /\" $(reboot)")],
                                order_reference="O-3")
    key_line = text.splitlines()[1]
    assert len(text.splitlines()) == 2 and '"' not in key_line and "$(" not in key_line


@pytest.mark.parametrize("bad", ["ssh-ed25519 AAAA\nssh-rsa BBBB", "TRAINYARD_AUTHORIZED_KEYS",
                                 'from="x" ssh-ed25519 AAAA'])
def test_anything_but_a_single_key_line_is_refused(bad):
    with pytest.raises(ValueError):
        authorized_keys_script([KeyLine(bad, "x")], order_reference="O-4", login_user="ubuntu")


@pytest.mark.parametrize("keys", [0, 1, 3])
def test_every_variant_passes_shellcheck(tmp_path, keys):
    if not shutil.which("shellcheck"):
        missing_service("shellcheck is not installed")
    path = tmp_path / "access.sh"
    path.write_text(authorized_keys_script([KeyLine(_line(), f"key {i}") for i in range(keys)],
                                           order_reference="O-5", login_user="ubuntu"))
    done = subprocess.run(["shellcheck", "-s", "sh", str(path)], capture_output=True, text=True)
    assert done.returncode == 0, done.stdout
