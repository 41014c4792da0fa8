"""The pipeline's own node scripts are shell files (provisioning/stack/sh/), their inputs in the
environment or a header of quoted TRAINYARD_* values: each passes shellcheck as it runs on the
node (with its header and shared functions inserted), and one is found for every script the
pipeline names."""

import subprocess

import pytest

from provisioning.acceptance import scripts as acceptance
from provisioning.drivers import driver_class, ssh
from provisioning.drivers.base import NodeTarget
from provisioning.stack import access, discover, disk, exporters, scripts
from provisioning.stack.shell import SH_DIR, assignments, header_values, lib_function, node_script
from provisioning.storage import node as storage_node
from tests.provisioning.stack.test_renderers import shellcheck
from tests.provisioning.stack.variants import variants


def _rendered(name: str) -> str:
    """A file of the torchtitan cluster (InfiniBand ports, a bucket, pruning: every input set)."""
    return variants()["torchtitan-cluster-ib-rank1"].file(name).content


AS_RUN = {
    "node_tools": scripts.node_tools_script,
    "revoke_access": scripts.revoke_access_script,
    "sanitise": scripts.sanitise_script,
    "inventory": scripts.inventory_script,
    "authorized_keys": access.authorized_keys_script,
    "discover": discover.discover_script,
    "disk_layout": disk.disk_layout_script,
    "exporters": exporters.exporters_script,
    # The stack's rendered scripts (every variant's are shellchecked in test_renderers.py).
    "bootstrap": lambda: _rendered("bootstrap.sh"),
    "launch": lambda: _rendered("launch.sh"),
    "sync_checkpoints": lambda: _rendered("sync-checkpoints"),
    "restore_checkpoints": lambda: _rendered("restore-checkpoints"),
    "storage_credentials": storage_node.credentials_script,
    "storage_retain": lambda: storage_node.retain_script(prefix="checkpoints/gpu-01"),
    "acceptance_job": lambda: acceptance.job_script(prefix="acceptance/run-1", bucket=True),
    "acceptance_checks": lambda: acceptance.checks_script(gpus=8, baseline_busbw_gbps=380.5,
                                                          probe_json='{"layers": 2}'),
    # The ssh driver's: the guard sits after the exports in the staged file (no shebang of its
    # own there); the power check, the cancel, the staging wrapper and the health check are passed
    # to sh -c.
    "fence_guard": lambda: "#!/usr/bin/env bash\n" + ssh.fence_guard(12, first_line=60),
    "fence_check": lambda: "#!/bin/sh\n" + ssh._FENCE_CHECK,
    "fence_cancel": lambda: "#!/bin/sh\n" + ssh._CANCEL_COMMAND,
    "run_staged": lambda: "#!/bin/sh\n" + ssh._RUN_STAGED,
    "gpu_health": lambda: "#!/bin/sh\n" + ssh._HEALTH_COMMAND,
    "deploy_os": lambda: ssh._deploy_script("ubuntu", "24.04", ("curl", "python3"),
                                            variant="cuda-12.8"),
}


@pytest.mark.parametrize("name", sorted(AS_RUN))
def test_each_node_script_as_it_runs_passes_shellcheck(tmp_path, name):
    path = tmp_path / f"{name}.sh"
    path.write_text(AS_RUN[name]())
    done = subprocess.run([shellcheck(), "--severity=style", str(path)], capture_output=True,
                          text=True)
    assert done.returncode == 0, done.stdout


def test_every_shell_file_is_a_script_the_pipeline_runs_or_a_shared_function():
    files = {p.stem for p in SH_DIR.glob("*.sh")}
    assert files == set(AS_RUN)
    for lib in (SH_DIR / "lib").glob("*.sh"):
        assert lib_function(lib.stem).startswith(f"{lib.stem}() {{")


def test_a_shared_function_is_inserted_after_the_header_not_before_the_shebang():
    text = node_script("sanitise", libs=("release_device",))
    assert text.startswith("#!/usr/bin/env bash\n")
    assert text.index("release_device() {") < text.index('method="${TRAINYARD_WIPE_METHOD')
    assert text.count("release_device() {") == 1


def _walk(tmp_path, find_body: str) -> subprocess.CompletedProcess:
    """``walk`` (sh/lib/walk.sh) with a stand-in ``find`` that prints one entry, then ``find_body``."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "find").write_text(f"#!/bin/sh\necho 'file /tmp/kept'\n{find_body}\n")
    (bin_dir / "find").chmod(0o755)
    script = lib_function("walk") + 'walk /tmp -mindepth 1\necho "status $?"\n'
    return subprocess.run(["bash", "-c", script], capture_output=True, text=True,
                          env={"PATH": f"{bin_dir}:/usr/bin:/bin"})


def test_walk_passes_over_entries_that_vanish_while_find_walks(tmp_path):
    done = _walk(tmp_path, "echo \"find: '/tmp/pytest-1/x': No such file or directory\" >&2\nexit 1")
    assert done.stdout == "file /tmp/kept\nstatus 0\n" and done.stderr == ""


def test_walk_fails_on_any_other_error_and_says_it(tmp_path):
    done = _walk(tmp_path, "echo \"find: '/tmp/x': No such file or directory\" >&2\n"
                           "echo \"find: '/tmp/secret': Permission denied\" >&2\nexit 1")
    assert done.stdout == "file /tmp/kept\nstatus 1\n"
    assert "Permission denied" in done.stderr


def test_walk_with_the_real_find_while_another_process_removes_directories(tmp_path):
    """What made the hand-back's inventory fail under a parallel test run: find 4.9 exits 1 when
    a directory is removed between being listed and being opened."""
    churn = tmp_path / "churn"
    churn.mkdir()
    remover = subprocess.Popen(["bash", "-c", f'for i in $(seq 4000); do mkdir -p "{churn}/d$i/a/b"; '
                                              f'touch "{churn}/d$i/a/b/f"; rm -rf "{churn}/d$i"; done'])
    script = lib_function("walk") + (
        f'ok=0; for _ in $(seq 150); do walk "{churn}" -ignore_readdir_race -mindepth 1 '
        '-printf "file %p\\n" >/dev/null || ok=1; done; echo "status $ok"\n')
    try:
        done = subprocess.run(["bash", "-c", script], capture_output=True, text=True, timeout=300)
    finally:
        remover.kill()
        remover.wait()
    assert done.stdout == "status 0\n", done.stderr


def test_header_values_reach_the_script_exactly_as_given():
    value = "it's $HOME `id` \"q\"\nsecond line"
    header = assignments({"TRAINYARD_ONE": value, "TRAINYARD_LIST": ("a b", "$c", "")})
    done = subprocess.run(["bash", "-c", header + 'printf "%s|" "$TRAINYARD_ONE" "${TRAINYARD_LIST[@]}"'],
                          capture_output=True, text=True, env={"PATH": "/usr/bin:/bin"})
    assert done.stdout == f"{value}|a b|$c||"


@pytest.mark.parametrize("name", ["PATH", "trainyard_x", "TRAINYARD_X; rm -rf /", "TRAINYARD_"])
def test_a_header_name_that_is_not_a_trainyard_variable_is_refused(name):
    with pytest.raises(ValueError, match="is not a TRAINYARD_\\* variable name"):
        assignments({name: "1"})


def test_a_readers_view_of_the_header_gives_back_each_single_line_value():
    header = assignments({"TRAINYARD_HOST": "gpu-h100-a01", "TRAINYARD_NOTE": "it's $x",
                          "TRAINYARD_LIST": ("a", "b"), "TRAINYARD_FILE": "line 1\nline 2"})
    assert header_values(header + "echo done\n") == {"TRAINYARD_HOST": "gpu-h100-a01",
                                                     "TRAINYARD_NOTE": "it's $x"}


def test_the_simulated_driver_echoes_a_header_value_not_its_name(tmp_path):
    script = node_script("bootstrap", values={"TRAINYARD_BOOTSTRAP_HOST": "gpu-h100-a01"})
    driver = driver_class("simulated")(NodeTarget(
        hostname="gpu-h100-a01", address="10.0.0.1", gpu_count=8, gpu_name="H100",
        options={"delay_scale": 0, "state_dir": str(tmp_path)}))
    lines = []
    driver.run(script, name="bootstrap", on_line=lines.append)
    assert any("gpu-h100-a01" in line for line in lines), lines
    assert not any("$TRAINYARD_BOOTSTRAP_HOST" in line for line in lines), lines
