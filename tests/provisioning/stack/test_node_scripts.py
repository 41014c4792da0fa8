"""The pipeline's own node scripts are shell files (provisioning/stack/sh/): each passes
shellcheck as it runs on the node (with its shared functions inserted), and one is found for every
script the pipeline names."""

import subprocess

import pytest

from provisioning.stack import access, discover, disk, exporters, scripts
from provisioning.stack.shell import SH_DIR, lib_function, node_script
from tests.provisioning.stack.test_renderers import shellcheck

AS_RUN = {
    "node_tools": scripts.node_tools_script,
    "revoke_access": scripts.revoke_access_script,
    "sanitise": scripts.sanitise_script,
    "inventory": scripts.inventory_script,
    "authorized_keys": access.authorized_keys_script,
    "discover": discover.discover_script,
    "disk_layout": disk.disk_layout_script,
    "exporters": exporters.exporters_script,
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
