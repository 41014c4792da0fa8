"""The fence guard (stack/sh/fence_guard.sh) run for real with bash, staged exactly as the ssh
driver stages it (``staged_script``) and started the way its wrapper starts it
(``bash FILE FENCE_DIR``): a stale token is refused before the script runs, a newer one stops
the older execution first, and the guard's header stays out of the script's environment.
The same guard over a real sshd is tested in test_driver_contract.py."""

import subprocess
import time

from provisioning.drivers.base import FENCED_EXIT_STATUS
from provisioning.drivers.ssh import staged_script


def _start(tmp_path, name: str, script: str, *, token: int, env=None) -> subprocess.Popen:
    staged = tmp_path / f"{name}.staged"
    staged.write_text(staged_script(script, env or {}, token=token))
    return subprocess.Popen(["bash", str(staged), str(tmp_path / "fence")], cwd=tmp_path,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            stdin=subprocess.DEVNULL, text=True)


def _run(tmp_path, name: str, script: str, *, token: int, env=None):
    proc = _start(tmp_path, name, script, token=token, env=env)
    out, _ = proc.communicate(timeout=60)
    return proc.returncode, out


def test_a_stale_token_is_refused_and_its_script_never_runs(tmp_path):
    assert _run(tmp_path, "newer", "echo newer ran\n", token=5) == (0, "newer ran\n")
    status, out = _run(tmp_path, "stale", "echo stale ran\ntouch stale-marker\n", token=4)
    assert status == FENCED_EXIT_STATUS
    assert out == "trainyard: a newer execution holds this node (fence 5, ours 4); stopping\n"
    assert not (tmp_path / "stale-marker").exists()
    assert (tmp_path / "fence" / "fence").read_text() == "5\n"


def test_the_same_token_again_runs_a_retry_of_the_same_step(tmp_path):
    assert _run(tmp_path, "first", "echo one\n", token=7) == (0, "one\n")
    assert _run(tmp_path, "retry", "echo two\nexit 3\n", token=7) == (3, "two\n")


def test_a_newer_token_stops_the_older_execution_before_it_runs(tmp_path):
    older = _start(tmp_path, "older", "echo begin\nsleep 30\necho finished\n", token=10)
    assert older.stdout.readline() == "begin\n"
    started = time.monotonic()
    status, out = _run(tmp_path, "newer", "echo second\n", token=11)
    rest = older.stdout.read()
    older.wait(timeout=30)
    assert status == 0 and out.endswith("second\n")
    assert "trainyard: stopping an earlier execution (fence 10" in out
    assert older.returncode == FENCED_EXIT_STATUS and "finished" not in rest
    assert time.monotonic() - started < 20  # stopped, not waited out


def test_the_environment_reaches_the_script_and_the_guards_header_does_not(tmp_path):
    script = 'echo "$SECRET_ONE ${TRAINYARD_FENCE_TOKEN:-no header} $0"\n'
    status, out = _run(tmp_path, "env", script, token=1, env={"SECRET_ONE": "it's here"})
    assert status == 0 and out.startswith("it's here no header ")
    assert "trainyard-step-" in out  # the script proper ran from its own file, not the staged one
