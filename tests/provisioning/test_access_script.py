"""The authorized_keys installer (sh/authorized_keys.sh): what it writes under a scratch root (run
for real with bash), and that it refuses anything but single key lines (its shellcheck:
test_node_scripts.py, with every node script)."""

import os
import shutil
import stat
import subprocess

import pytest

from provisioning.stack.access import (
    KeyLine,
    authorized_keys_env,
    authorized_keys_script,
    authorized_keys_text,
)
from tests.accounts.ssh_keygen import new_public_key
from tests.conftest import missing_service
from tests.provisioning.accounts import temporary_account


def _line() -> str:
    return " ".join(new_public_key().split()[:2])


def _run(keys: list[KeyLine], root, *, order_reference: str, login_user: str) -> subprocess.CompletedProcess:
    env = authorized_keys_env(keys, order_reference=order_reference, login_user=login_user)
    return subprocess.run(["bash", "-c", authorized_keys_script()], capture_output=True, text=True,
                          env={**os.environ, **env, "TRAINYARD_ROOT": str(root)})


def test_it_replaces_the_file_with_mode_600_and_leaves_sshd_alone_under_a_scratch_root(tmp_path):
    first, second = _line(), _line()
    target = tmp_path / "etc/trainyard/authorized_keys"
    done = _run([KeyLine(first, "laptop (alice)")], tmp_path, order_reference="O-1", login_user="ubuntu")
    assert done.returncode == 0, done.stderr
    assert stat.S_IMODE(target.stat().st_mode) == 0o600
    assert f"{first} laptop (alice)\n" in target.read_text()
    assert "sshd configuration left alone" in done.stdout
    done = _run([KeyLine(second, "ci")], tmp_path, order_reference="O-1", login_user="ubuntu")
    assert done.returncode == 0, done.stderr
    assert first not in target.read_text() and second in target.read_text()
    assert sorted(p.name for p in target.parent.iterdir()) == ["authorized_keys"]  # no temp left


def test_no_keys_leave_an_empty_file_that_opens_nothing(tmp_path):
    done = _run([], tmp_path, order_reference="O-2", login_user="ubuntu")
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
        authorized_keys_env([KeyLine(bad, "x")], order_reference="O-4", login_user="ubuntu")


def test_key_text_is_written_as_data_never_run(tmp_path):
    """The keys reach the script in its environment: text that would be shell is written as is."""
    env = authorized_keys_env([KeyLine(_line(), "k")], order_reference="O-7", login_user="ubuntu")
    env["TRAINYARD_AUTHORIZED_KEYS"] += "$(touch pwned) `touch pwned2`\n"
    done = subprocess.run(["bash", "-c", authorized_keys_script()], capture_output=True, text=True,
                          env={**os.environ, **env, "TRAINYARD_ROOT": str(tmp_path)}, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert not (tmp_path / "pwned").exists() and not (tmp_path / "pwned2").exists()
    written = (tmp_path / "etc/trainyard/authorized_keys").read_text()
    assert written.endswith("$(touch pwned) `touch pwned2`\n")


# --- sshd reads the Trainyard file only, for the login user only --------------------------------
def test_the_dropin_makes_the_trainyard_file_the_login_users_only_keys(tmp_path):
    """The real sshd's effective configuration (sshd -T -C), with the drop-in included as Debian's
    main config does: the login user reads only the Trainyard file; other accounts (the one the
    pipeline logs in with) keep theirs."""
    from provisioning.stack.access import KEYS_PATH, sshd_dropin
    from tests.provisioning.sshd import sshd_path

    sshd = sshd_path()
    if sshd is None or not shutil.which("ssh-keygen"):
        missing_service("sshd and ssh-keygen are not installed")
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(tmp_path / "hk")],
                   check=True)
    (tmp_path / "60-trainyard.conf").write_text(sshd_dropin("nobody"))
    (tmp_path / "sshd_config").write_text(
        f"Include {tmp_path}/60-trainyard.conf\nHostKey {tmp_path}/hk\n"
        "AuthorizedKeysFile .ssh/authorized_keys .ssh/authorized_keys2\nPasswordAuthentication no\n")

    def keys_file(user: str) -> str:
        done = subprocess.run([sshd, "-T", "-f", str(tmp_path / "sshd_config"), "-C",
                               f"user={user},host=localhost,addr=127.0.0.1"],
                              capture_output=True, text=True, check=True)
        return next(line for line in done.stdout.splitlines() if line.startswith("authorizedkeysfile"))

    assert keys_file("nobody") == f"authorizedkeysfile {KEYS_PATH}"  # not ~/.ssh/authorized_keys
    assert keys_file("root") == "authorizedkeysfile .ssh/authorized_keys .ssh/authorized_keys2"


# --- revoke: keys gone, sessions and processes ended --------------------------------------------
FAKES = {
    "loginctl": 'echo "loginctl $*" >> "$CALLS"',
    "usermod": 'echo "usermod $*" >> "$CALLS"',
    "crontab": 'echo "crontab $*" >> "$CALLS"; [ "$1" != -l ] || [ "${HAS_CRONTAB:-0}" = 1 ]',
    "pkill": 'echo "pkill $*" >> "$CALLS"; n=$(cat "$ALIVE"); [ "$n" -gt 0 ] || exit 1\n'
             '[ "${STUBBORN:-0}" = 1 ] || echo 0 > "$ALIVE"',
    "pgrep": '[ "$(cat "$ALIVE")" -gt 0 ] && { [ "$1" = -a ] && echo "4242 python train.py"; exit 0; }\n'
             'exit 1',
}


def _revoke(tmp_path, user: str, *, alive: int = 2, stubborn: bool = False,
            crontab: bool = False, sudo_user: str = ""):
    from provisioning.stack.scripts import revoke_access_script

    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(parents=True)
    for name, body in FAKES.items():
        (bin_dir / name).write_text(f"#!/bin/sh\n{body}\n")
        (bin_dir / name).chmod(0o755)
    (tmp_path / "alive").write_text(f"{alive}\n")
    keys = tmp_path / "etc/trainyard/authorized_keys"
    keys.parent.mkdir(parents=True)
    keys.write_text(_line() + "\n")
    env = {"PATH": f"{bin_dir}:/usr/bin:/bin", "TRAINYARD_ROOT": str(tmp_path),
           "TRAINYARD_LOGIN_USER": user, "CALLS": str(tmp_path / "calls"),
           "ALIVE": str(tmp_path / "alive"), "STUBBORN": "1" if stubborn else "0",
           "TRAINYARD_KILL_TRIES": "2", "HAS_CRONTAB": "1" if crontab else "0"}
    if sudo_user:
        env["SUDO_USER"] = sudo_user  # what sudo sets: the account Trainyard logged in with
    done = subprocess.run(["bash", "-c", revoke_access_script()], capture_output=True, text=True,
                          env=env)
    calls = (tmp_path / "calls").read_text().splitlines() if (tmp_path / "calls").exists() else []
    return done, calls, keys


@pytest.fixture
def customer():
    with temporary_account() as (name, _home):
        yield name


def test_revoke_removes_the_keys_and_ends_the_customers_sessions_and_processes(tmp_path, customer):
    done, calls, keys = _revoke(tmp_path, customer)
    assert done.returncode == 0, done.stdout + done.stderr
    assert not keys.exists()
    assert calls == [f"usermod -p * {customer}", f"crontab -l -u {customer}",
                     f"loginctl disable-linger {customer}", f"loginctl terminate-user {customer}",
                     f"pkill -KILL -u {customer}"]
    assert f"sessions and processes of {customer} ended" in done.stdout


def test_revoke_removes_the_customers_crontab_before_ending_its_processes(tmp_path, customer):
    """A cron line would start the customer's job again after the kill."""
    done, calls, _ = _revoke(tmp_path, customer, crontab=True)
    assert done.returncode == 0, done.stdout + done.stderr
    assert calls.index(f"crontab -r -u {customer}") < calls.index(f"pkill -KILL -u {customer}")
    assert f"crontab of {customer} removed" in done.stdout


def test_revoke_fails_when_a_process_survives(tmp_path, customer):
    done, _, _ = _revoke(tmp_path, customer, stubborn=True)
    assert done.returncode == 9 and "4242 python train.py" in done.stdout


@pytest.mark.parametrize("login, sudo_user, why", [
    ("root", "", "root is root"),
    ("daemon", "", "daemon is a system account"),
    ("nobody", "", "is not a directory of its own"),
    ("CUSTOMER", "CUSTOMER", "is the account Trainyard manages this node with"),
])
def test_revoke_refuses_an_account_that_is_not_the_customers_and_touches_nothing(
        tmp_path, customer, login, sudo_user, why):
    """Root, a system account, one without a home of its own, or the account Trainyard logs in
    with (sudo's caller) is never the customer's: ending its processes would break the node, and
    leaving them would leave the customer in. The step fails (exit 10) for staff to fix."""
    login, sudo_user = login.replace("CUSTOMER", customer), sudo_user.replace("CUSTOMER", customer)
    done, calls, keys = _revoke(tmp_path, login, sudo_user=sudo_user)
    assert done.returncode == 10 and why in done.stdout, done.stdout
    assert calls == [] and not keys.exists()  # the keys file goes anyway


def test_the_data_directory_goes_to_the_customer_but_never_through_a_link(tmp_path, customer):
    """The customer owns /data and could leave /data/checkpoints as a link to /etc: root must not
    follow it when it gives the directory to the customer again (a key sync runs this script)."""
    protected = tmp_path / "protected"
    protected.mkdir()
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "checkpoints").symlink_to(protected)
    done = _run([KeyLine(_line(), "k")], tmp_path, order_reference="O-6", login_user=customer)
    assert done.returncode == 0, done.stdout + done.stderr
    uid = int(subprocess.run(["id", "-u", customer], capture_output=True, text=True).stdout)
    assert protected.stat().st_uid == 0  # the link's target stayed root's
    checkpoints = tmp_path / "data" / "checkpoints"
    assert not checkpoints.is_symlink() and checkpoints.is_dir()
    assert checkpoints.stat().st_uid == uid and (tmp_path / "data").stat().st_uid == uid
