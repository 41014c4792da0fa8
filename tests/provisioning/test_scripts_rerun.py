"""The configure step's disk layout and the hand-back's sanitise script run again safely, refuse
what is not theirs, and free a busy device before erasing it: they run for real under bash with
stand-ins for mdadm, blkid, lsblk, findmnt, wipefs, mkfs.xfs, mountpoint, mount, umount, fuser,
systemctl, blkdiscard (and blockdev, cmp, dd: a wiped stand-in device reads back zeros) that keep
each device's state and fail as the real tools do: wipefs, mkfs and
blkdiscard refuse a device that is mounted or in an assembled array, mdadm refuses to stop a
mounted array or zero a member of a running one, umount refuses a mount a process or unit holds.

State under $STATE: <dev>.label (a filesystem label), <dev>.parts (partition <dev>p1),
<dev>.member (an array superblock: the array's name), arrays/<md>.{path,members} (assembled),
mounts ("SOURCE TARGET" lines), busy (targets a process holds), units (active units)."""

import subprocess
from types import SimpleNamespace

import pytest

from provisioning.stack.disk import disk_layout_env, disk_layout_script
from provisioning.stack.scripts import handback_env, sanitise_script

COMMON = """bn() { basename "$1"; }
in_array() {  # is device $1 (or its partition) a member of an assembled array?
  local d; d=$(bn "$1"); d=${d%p1}
  grep -qx "$d" "$STATE"/arrays/*.members 2>/dev/null
}
mounted() { grep -q "^$1 " "$STATE/mounts" 2>/dev/null; }
busy_dev() {  # mounted itself, a partition mounted, or in a running array
  mounted "$1" || mounted "${1}p1" || in_array "$1"
}
log() { echo "$*" >> "$STATE/calls"; }
"""
TOOLS = {
    "mdadm": """case "$1" in
  --detail) [ -e "$STATE/arrays/$(bn "${!#}").path" ] || exit 1
            if [ "$2" = --brief ]; then echo "ARRAY $3 metadata=1.2"; fi ;;
  --examine) [ -e "$STATE/$(bn "$2").member" ] ;;
  --create) md=$(bn "$2"); [ -e "$STATE/arrays/$md.path" ] && { echo "mdadm: $2 exists" >&2; exit 1; }
            mkdir -p "$STATE/arrays"; echo "$2" > "$STATE/arrays/$md.path"; touch "$2"
            for a in "$@"; do case "$a" in /dev/*) bn "$a" >> "$STATE/arrays/$md.members"
              echo "$md" > "$STATE/$(bn "$a").member" ;; esac; done
            log create ;;
  --stop) mounted "$2" && { echo "mdadm: Cannot get exclusive access to $2" >&2; exit 1; }
          md=$(bn "$2"); rm -f "$STATE/arrays/$md.path" "$STATE/arrays/$md.members"; log "stop $md" ;;
  --zero-superblock) in_array "$2" && { echo "mdadm: Couldn't open $2 for write" >&2; exit 1; }
                     rm -f "$STATE/$(bn "$2").member"; log "zero $(bn "$2")" ;;
esac""",
    "blkid": 'f="$STATE/$(bn "${!#}").label"; [ -e "$f" ] && cat "$f"',
    "lsblk": """dev="${!#}"; d=$(bn "$dev"); types=0; case "$*" in *TYPE*) types=1 ;; esac
row() { if [ "$types" = 1 ]; then echo "$1 $2"; else echo "$1"; fi; }
row "$dev" disk
if [ -e "$STATE/$d.parts" ]; then row "${dev}p1" part; fi
for m in "$STATE"/arrays/*.members; do
  [ -e "$m" ] || continue
  if grep -qx -e "$d" -e "${d}p1" "$m"; then row "$(cat "${m%.members}.path")" raid1; fi
done""",
    "findmnt": """src="${!#}"; found=1
while read -r s t; do [ "$s" = "$src" ] && { echo "$t"; found=0; }; done < "$STATE/mounts"
exit $found""",
    "wipefs": """dev="${!#}"; d=$(bn "$dev")
if [ "$1" = -a ]; then
  busy_dev "$dev" && { echo "wipefs: error: $dev: probing initialization failed:" \
    "Device or resource busy" >&2; exit 1; }
  rm -f "$STATE/$d.label" "$STATE/$d.parts"; log "wipefs $d"
elif [ -e "$STATE/$d.label" ] || [ -e "$STATE/$d.parts" ]; then
  echo "DEVICE OFFSET TYPE"; echo "$d 0x0 gpt"
fi""",
    "mkfs.xfs": """dev="${!#}"
busy_dev "$dev" && { echo "mkfs.xfs: $dev contains a mounted filesystem" >&2; exit 1; }
echo trainyard > "$STATE/$(bn "$dev").label"; log "mkfs $(bn "$dev")"
""",
    "mountpoint": 'grep -q " ${!#}$" "$STATE/mounts"',
    "mount": """target="${!#}"; src="$3"
grep -q " $target$" "$STATE/mounts" && exit 32
[ -e "$STATE/$(bn "$src").label" ] || exit 32  # no filesystem on the device
echo "$src $target" >> "$STATE/mounts"; log mount""",
    "umount": """target="$1"
if grep -qx "$target" "$STATE/busy" 2>/dev/null || { [ "$target" = "$MNT" ] && [ -s "$STATE/units" ]; }; then
  echo "umount: $target: target is busy." >&2; exit 32
fi
grep -v " $target$" "$STATE/mounts" > "$STATE/mounts.new" || true; mv "$STATE/mounts.new" "$STATE/mounts"
log umount""",
    "fuser": """target="${!#}"; grep -qx "$target" "$STATE/busy" 2>/dev/null || exit 1
grep -vx "$target" "$STATE/busy" > "$STATE/busy.new" || true; mv "$STATE/busy.new" "$STATE/busy"
log "kill $(bn "$target")" """,
    "systemctl": """case "$1" in
  is-active) grep -qx "${!#}" "$STATE/units" 2>/dev/null ;;
  stop) grep -vx "$2" "$STATE/units" > "$STATE/units.new" || true; mv "$STATE/units.new" "$STATE/units"
        log "stop $2" ;;
esac""",
    "blkdiscard": """dev="${!#}"; busy_dev "$dev" && {
  echo "blkdiscard: cannot open $dev: Device or resource busy" >&2; exit 1; }
case "$1" in -z) log "zero-out $dev" ;; *) log "discard $dev" ;; esac""",
    "blockdev": "echo 1073741824",
    "cmp": "exit 0",
    "dd": "exit 0",
}
DEVICES = ["/dev/nvme0n1", "/dev/nvme1n1"]


@pytest.fixture
def host(tmp_path):
    bin_dir, state, root = tmp_path / "bin", tmp_path / "state", tmp_path / "root"
    for d in (bin_dir, state, root, root / "dev"):
        d.mkdir()
    (state / "mounts").touch()
    (bin_dir / "common.sh").write_text(COMMON)
    for name, body in TOOLS.items():
        tool = bin_dir / name
        tool.write_text(f"#!/usr/bin/env bash\n. {bin_dir}/common.sh\n{body}\n")
        tool.chmod(0o755)
    md = root / "dev" / "md0"

    def run(script: str, script_env=None, **extra_env: str) -> subprocess.CompletedProcess:
        env = {"PATH": f"{bin_dir}:/usr/bin:/bin", "STATE": str(state), "TRAINYARD_ROOT": str(root),
               "TRAINYARD_MD_DEVICE": str(md), "MNT": str(root / "data"), **(script_env or {}),
               **extra_env}
        return subprocess.run(["bash", "-c", script], env=env, capture_output=True, text=True)

    def calls() -> list[str]:
        path = state / "calls"
        return path.read_text().split("\n")[:-1] if path.exists() else []

    def mark(device: str, what: str, text: str = "") -> None:
        (state / f"{device.rsplit('/', 1)[-1]}.{what}").write_text(text)

    def foreign_array(path: str, members, mounted_on: str, busy: bool) -> None:
        """An array another system left, assembled, mounted, a process holding the mount."""
        name = path.rsplit("/", 1)[-1]
        (state / "arrays").mkdir(exist_ok=True)
        (state / "arrays" / f"{name}.path").write_text(path + "\n")
        (state / "arrays" / f"{name}.members").write_text(
            "".join(m.rsplit("/", 1)[-1] + "\n" for m in members))
        for m in members:
            mark(m, "member", name)
        with (state / "mounts").open("a") as fh:
            fh.write(f"{path} {mounted_on}\n")
        if busy:
            (state / "busy").write_text(mounted_on + "\n")

    def hold(target: str = "", units=()) -> None:
        if target:
            (state / "busy").write_text(target + "\n")
        (state / "units").write_text("".join(u + "\n" for u in units))

    return SimpleNamespace(run=run, calls=calls, mark=mark, root=root, md=md, state=state,
                           foreign_array=foreign_array, hold=hold)


def layout(raid="raid0", wipe=False):
    """The script and its environment, as the configure step runs it."""
    return disk_layout_script(), disk_layout_env(devices=DEVICES, raid=raid, wipe=wipe)


def test_configure_runs_twice_and_builds_the_array_once(host):
    first = host.run(*layout())
    assert first.returncode == 0, first.stdout + first.stderr
    second = host.run(*layout())
    assert second.returncode == 0, second.stdout + second.stderr
    assert host.calls() == ["create", "mkfs md0", "mount"]
    assert "already assembled; skipping" in second.stdout
    assert "already has a filesystem; skipping" in second.stdout
    assert "already mounted; skipping" in second.stdout
    fstab = (host.root / "etc" / "fstab").read_text().splitlines()
    assert fstab == ["LABEL=trainyard /data xfs defaults,noatime,nofail 0 2"]
    assert "ARRAY" in (host.root / "etc" / "mdadm" / "mdadm.conf").read_text()


def test_a_single_drive_gets_xfs_without_an_array(host):
    done = host.run(*layout(raid="single"))
    assert done.returncode == 0, done.stdout
    assert host.calls() == ["mkfs nvme0n1", "mount"]


@pytest.mark.parametrize("what, found", [("parts", "partitions"), ("label", "a signature"),
                                         ("member", "an array superblock")])
def test_a_device_with_something_on_it_is_refused_and_left_alone(host, what, found):
    host.mark("/dev/nvme1n1", what, "old-data")
    done = host.run(*layout())
    assert done.returncode == 4
    assert f"refusing /dev/nvme1n1: it has {found}" in done.stdout
    assert "wipe_data_devices" in done.stdout
    assert host.calls() == []  # nothing was created, erased or mounted


def test_the_wipe_flag_erases_foreign_devices_first(host):
    host.mark("/dev/nvme1n1", "parts")
    host.mark("/dev/nvme1n1", "member", "md126")
    done = host.run(*layout(wipe=True))
    assert done.returncode == 0, done.stdout + done.stderr
    assert host.calls() == ["wipefs nvme1n1p1", "zero nvme1n1", "wipefs nvme1n1", "create",
                            "mkfs md0", "mount"]


def test_the_wipe_flag_stops_a_mounted_foreign_array_and_what_holds_it_first(host):
    host.foreign_array("/dev/md127", DEVICES, "/mnt/old", busy=True)
    done = host.run(*layout(wipe=True))
    assert done.returncode == 0, done.stdout + done.stderr
    assert host.calls() == ["kill old", "umount", "stop md127", "zero nvme0n1", "wipefs nvme0n1",
                            "zero nvme1n1", "wipefs nvme1n1", "create", "mkfs md0", "mount"]
    assert "unmounted /mnt/old (/dev/md127)" in done.stdout


def test_the_stand_in_wipefs_refuses_a_device_still_in_a_running_array(host):
    """The stand-ins are honest: erasing without stopping the array fails, as on a real node."""
    host.foreign_array("/dev/md127", DEVICES, "/mnt/old", busy=False)
    done = host.run("wipefs -a /dev/nvme0n1")
    assert done.returncode == 1 and "Device or resource busy" in done.stderr
    done = host.run("umount /mnt/old && mdadm --stop /dev/md127 && wipefs -a /dev/nvme0n1")
    assert done.returncode == 0, done.stderr


def sanitise(host, method="discard", devices=DEVICES):
    env = handback_env(login_user="", wipe_method=method, devices=devices)
    return host.run(sanitise_script(), **env)


def test_sanitise_stops_the_units_on_data_then_frees_and_discards_twice(host):
    assert host.run(*layout()).returncode == 0
    host.hold(units=["trainyard-tensorboard.service", "trainyard-checkpoint-sync.timer"])
    for _ in range(2):
        done = sanitise(host)
        assert done.returncode == 0, done.stdout + done.stderr
    assert host.calls() == ["create", "mkfs md0", "mount",
                            "stop trainyard-checkpoint-sync.timer",
                            "stop trainyard-tensorboard.service", "umount",
                            "stop md0", "discard /dev/nvme0n1", "discard /dev/nvme1n1",
                            "discard /dev/nvme0n1", "discard /dev/nvme1n1"]
    assert "wiped /dev/nvme0n1 (discard); it reads back zeros" in done.stdout


def test_sanitise_kills_nothing_by_filesystem_and_wipes_nothing_while_data_is_busy(host):
    """The customer's processes were ended before (revoke_access); whatever still holds /data is
    not the customer's to kill: the step fails, saying so, and no device is touched."""
    assert host.run(*layout()).returncode == 0
    host.hold(str(host.root / "data"))
    done = sanitise(host)
    assert done.returncode == 5 and "is still in use" in done.stdout
    assert host.calls() == ["create", "mkfs md0", "mount"]  # no kill, no umount, no discard


def test_sanitise_refuses_a_device_mounted_anywhere_else(host):
    """A recorded device mounted outside /data (a foreign array, the system disk) is not this
    order's data device: nothing is killed, unmounted or wiped."""
    host.foreign_array("/dev/md127", DEVICES, "/srv/scratch", busy=True)
    done = sanitise(host)
    assert done.returncode == 5, done.stdout + done.stderr
    assert "/dev/nvme0n1 (/dev/md127) is mounted at /srv/scratch" in done.stdout
    assert host.calls() == []


def test_sanitise_frees_an_unmounted_foreign_array_the_devices_belong_to(host):
    host.foreign_array("/dev/md127", DEVICES, "/srv/scratch", busy=False)
    assert host.run("umount /srv/scratch").returncode == 0  # assembled, no longer mounted
    done = sanitise(host)
    assert done.returncode == 0, done.stdout + done.stderr
    assert host.calls() == ["umount", "stop md127", "discard /dev/nvme0n1", "discard /dev/nvme1n1"]


def test_the_files_method_refuses_a_data_directory_that_is_a_mount(host):
    """Without recorded devices /data should be a directory of the system disk; a mount there is
    an undeclared device whose data an emptied mountpoint would hide, not remove."""
    assert host.run(*layout()).returncode == 0
    done = sanitise(host, method="files", devices=[])
    assert done.returncode == 5 and "no data device is recorded: declare it" in done.stdout
    assert host.calls() == ["create", "mkfs md0", "mount"]


def test_sanitise_writes_zeros_with_the_zero_method(host):
    done = sanitise(host, method="zero")
    assert done.returncode == 0, done.stdout + done.stderr
    assert host.calls() == ["zero-out /dev/nvme0n1", "zero-out /dev/nvme1n1"]


@pytest.mark.parametrize("method, devices, says", [
    ("files", DEVICES, "data devices are recorded"),
    ("discard", [], "no data devices recorded"),
    ("shred", DEVICES, "unknown wipe method shred"),
])
def test_sanitise_refuses_a_wipe_method_that_does_not_fit_the_devices(host, method, devices, says):
    done = sanitise(host, method=method, devices=devices)
    assert done.returncode == 2
    assert says in done.stdout
    assert host.calls() == []  # nothing was touched


