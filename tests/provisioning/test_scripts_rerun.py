"""Every script the pipeline runs on a node can run again: a retried step on real hardware finds
its own earlier work (array, filesystem, mount) and skips it instead of failing on it.

The scripts run for real under ``sh`` with stand-ins for mdadm, blkid, mkfs.ext4, mountpoint,
mount, umount and blkdiscard that behave as the real tools do on their state: ``mdadm --create``
refuses an array that exists, ``mkfs`` records a filesystem, ``mount`` a mount."""

import subprocess
from types import SimpleNamespace

import pytest

from provisioning.stack.scripts import configure_script, wipe_script

TOOLS = {
    "mdadm": """case "$1" in
  --detail) [ -e "$STATE/md" ] ;;
  --create) [ -e "$STATE/md" ] && { echo "mdadm: device $2 exists" >&2; exit 1; }
            touch "$STATE/md"; echo "create" >> "$STATE/calls" ;;
  --stop) rm -f "$STATE/md"; echo "stop" >> "$STATE/calls" ;;
esac""",
    "blkid": '[ -e "$STATE/fs" ]',
    "mkfs.ext4": 'touch "$STATE/fs"; echo "mkfs" >> "$STATE/calls"',
    "mountpoint": '[ -e "$STATE/mounted" ]',
    "mount": '[ -e "$STATE/mounted" ] && exit 32; touch "$STATE/mounted"; echo "mount" >> "$STATE/calls"',
    "umount": 'rm -f "$STATE/mounted"; echo "umount" >> "$STATE/calls"',
    "blkdiscard": 'echo "discard $2" >> "$STATE/calls"',
}


@pytest.fixture
def host(tmp_path):
    bin_dir, state, root = tmp_path / "bin", tmp_path / "state", tmp_path / "root"
    for d in (bin_dir, state, root, root / "dev"):
        d.mkdir()
    for name, body in TOOLS.items():
        tool = bin_dir / name
        tool.write_text(f"#!/bin/sh\n{body}\n")
        tool.chmod(0o755)
    md = root / "dev" / "md0"
    md.touch()  # the array's device node, as the kernel shows it once assembled

    def run(script: str) -> subprocess.CompletedProcess:
        env = {"PATH": f"{bin_dir}:/usr/bin:/bin", "STATE": str(state), "TRAINYARD_ROOT": str(root),
               "TRAINYARD_MD_DEVICE": str(md), "TRAINYARD_NODE": "gpu-1", "TRAINYARD_ORDER": "O-1"}
        return subprocess.run(["sh", "-c", script], env=env, capture_output=True, text=True)

    def calls() -> list[str]:
        path = state / "calls"
        return path.read_text().split("\n")[:-1] if path.exists() else []

    return SimpleNamespace(run=run, calls=calls)


def _order(raid="raid0"):
    network = SimpleNamespace(kind="ethernet", speed_gbps=100, __str__=lambda self: "100 GbE")
    return SimpleNamespace(nvme=SimpleNamespace(raid=raid), network=network)


NODE = SimpleNamespace(nvme_devices=["/dev/nvme0n1", "/dev/nvme1n1"])


def test_configure_runs_twice_and_builds_the_array_once(host):
    script = configure_script(_order(), NODE)
    first = host.run(script)
    assert first.returncode == 0, first.stdout + first.stderr
    second = host.run(script)
    assert second.returncode == 0, second.stdout + second.stderr
    assert host.calls() == ["create", "mkfs", "mount"]
    assert "already assembled; skipping" in second.stdout
    assert "already has a filesystem; skipping" in second.stdout
    assert "already mounted; skipping" in second.stdout


def test_wipe_runs_twice(host):
    host.run(configure_script(_order(), NODE))
    for _ in range(2):
        done = host.run(wipe_script(NODE.nvme_devices))
        assert done.returncode == 0, done.stdout + done.stderr
    assert host.calls() == ["create", "mkfs", "mount", "umount", "stop",
                            "discard /dev/nvme0n1", "discard /dev/nvme1n1",
                            "discard /dev/nvme0n1", "discard /dev/nvme1n1"]
