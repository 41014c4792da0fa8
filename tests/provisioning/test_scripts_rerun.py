"""The configure step's disk layout and the wipe script run again safely, and refuse what is not
theirs: they run for real under bash with stand-ins for mdadm, blkid, lsblk, wipefs, mkfs.xfs,
mountpoint, mount, umount and blkdiscard that keep each device's state as the real tools do
(a filesystem label, partitions, an array superblock, a mount)."""

import subprocess
from types import SimpleNamespace

import pytest

from provisioning.stack.disk import disk_layout_script
from provisioning.stack.scripts import wipe_script

# $STATE/<name>.label: filesystem label; .parts: partitions; .member: array superblock.
TOOLS = {
    "mdadm": """dev=$(basename "${2:-x}")
case "$1" in
  --detail) [ -e "$STATE/md" ] || exit 1
            if [ "${2:-}" = --brief ]; then echo "ARRAY $3 metadata=1.2"; fi ;;
  --examine) [ -e "$STATE/$dev.member" ] ;;
  --create) [ -e "$STATE/md" ] && { echo "mdadm: $2 exists" >&2; exit 1; }
            touch "$STATE/md" "$2"; echo "create" >> "$STATE/calls" ;;
  --stop) rm -f "$STATE/md" "$2"; echo "stop" >> "$STATE/calls" ;;
  --zero-superblock) rm -f "$STATE/$dev.member"; echo "zero $dev" >> "$STATE/calls" ;;
esac""",
    "blkid": 'f="$STATE/$(basename "${!#}").label"; [ -e "$f" ] && cat "$f"',
    "lsblk": 'dev=$(basename "${!#}"); echo "$dev"; [ -e "$STATE/$dev.parts" ] && echo "${dev}p1"; true',
    "wipefs": """dev=$(basename "${!#}")
if [ "$1" = -a ]; then rm -f "$STATE/$dev.label" "$STATE/$dev.parts"; echo "wipefs $dev" >> "$STATE/calls"
elif [ -e "$STATE/$dev.label" ] || [ -e "$STATE/$dev.parts" ]; then
  echo "DEVICE OFFSET TYPE"; echo "$dev 0x0 gpt"
fi""",
    "mkfs.xfs": """dev=$(basename "${!#}")
echo trainyard-data > "$STATE/$dev.label"
echo "mkfs $dev" >> "$STATE/calls"
""",
    "mountpoint": '[ "${!#}" != "$MNT" ] && exit 1; [ -e "$STATE/mounted" ]',
    "mount": '[ -e "$STATE/mounted" ] && exit 32; touch "$STATE/mounted"; echo "mount" >> "$STATE/calls"',
    "umount": 'rm -f "$STATE/mounted"; echo "umount" >> "$STATE/calls"',
    "blkdiscard": 'echo "discard $2" >> "$STATE/calls"',
}
DEVICES = ["/dev/nvme0n1", "/dev/nvme1n1"]


@pytest.fixture
def host(tmp_path):
    bin_dir, state, root = tmp_path / "bin", tmp_path / "state", tmp_path / "root"
    for d in (bin_dir, state, root, root / "dev"):
        d.mkdir()
    for name, body in TOOLS.items():
        tool = bin_dir / name
        tool.write_text(f"#!/usr/bin/env bash\n{body}\n")
        tool.chmod(0o755)
    md = root / "dev" / "md0"

    def run(script: str) -> subprocess.CompletedProcess:
        env = {"PATH": f"{bin_dir}:/usr/bin:/bin", "STATE": str(state), "TRAINYARD_ROOT": str(root),
               "TRAINYARD_MD_DEVICE": str(md), "MNT": str(root / "data")}
        return subprocess.run(["bash", "-c", script], env=env, capture_output=True, text=True)

    def calls() -> list[str]:
        path = state / "calls"
        return path.read_text().split("\n")[:-1] if path.exists() else []

    def mark(device: str, what: str, text: str = "") -> None:
        (state / f"{device.rsplit('/', 1)[-1]}.{what}").write_text(text)

    return SimpleNamespace(run=run, calls=calls, mark=mark, root=root, md=md)


def layout(raid="raid0", wipe=False):
    return disk_layout_script(hostname="gpu-1", devices=DEVICES, raid=raid, wipe=wipe)


def test_configure_runs_twice_and_builds_the_array_once(host):
    first = host.run(layout())
    assert first.returncode == 0, first.stdout + first.stderr
    second = host.run(layout())
    assert second.returncode == 0, second.stdout + second.stderr
    assert host.calls() == ["create", "mkfs md0", "mount"]
    assert "already assembled; skipping" in second.stdout
    assert "already has a filesystem; skipping" in second.stdout
    assert "already mounted; skipping" in second.stdout
    fstab = (host.root / "etc" / "fstab").read_text().splitlines()
    assert fstab == ["LABEL=trainyard-data /data xfs defaults,noatime,nofail 0 2"]
    assert "ARRAY" in (host.root / "etc" / "mdadm" / "mdadm.conf").read_text()


def test_a_single_drive_gets_xfs_without_an_array(host):
    done = host.run(layout(raid="single"))
    assert done.returncode == 0, done.stdout
    assert host.calls() == ["mkfs nvme0n1", "mount"]


@pytest.mark.parametrize("what, found", [("parts", "partitions"), ("label", "a signature"),
                                         ("member", "an array superblock")])
def test_a_device_with_something_on_it_is_refused_and_left_alone(host, what, found):
    host.mark("/dev/nvme1n1", what, "old-data")
    done = host.run(layout())
    assert done.returncode == 4
    assert f"refusing /dev/nvme1n1: it has {found}" in done.stdout
    assert "wipe_data_devices" in done.stdout
    assert host.calls() == []  # nothing was created, erased or mounted


def test_the_wipe_flag_erases_foreign_devices_first(host):
    host.mark("/dev/nvme1n1", "parts")
    host.mark("/dev/nvme1n1", "member")
    done = host.run(layout(wipe=True))
    assert done.returncode == 0, done.stdout
    assert host.calls() == ["zero nvme1n1", "wipefs nvme1n1", "create", "mkfs md0", "mount"]


def test_wipe_runs_twice(host):
    host.run(layout())
    for _ in range(2):
        done = host.run(wipe_script(DEVICES))
        assert done.returncode == 0, done.stdout + done.stderr
    assert host.calls() == ["create", "mkfs md0", "mount", "umount", "stop",
                            "discard /dev/nvme0n1", "discard /dev/nvme1n1",
                            "discard /dev/nvme0n1", "discard /dev/nvme1n1"]


@pytest.mark.parametrize("raid, wipe", [("single", False), ("raid0", False), ("raid10", True)])
def test_the_disk_layout_passes_shellcheck(raid, wipe, tmp_path):
    from tests.provisioning.stack.test_renderers import shellcheck

    path = tmp_path / "configure.sh"
    path.write_text(disk_layout_script(hostname="gpu-1", devices=DEVICES, raid=raid, wipe=wipe))
    done = subprocess.run([shellcheck(), "--severity=style", str(path)], capture_output=True,
                          text=True)
    assert done.returncode == 0, done.stdout
