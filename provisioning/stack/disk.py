"""The data disk layout of the configure step (``sh/disk_layout.sh``, its inputs in the environment
built here): the node's NVMe data devices as one XFS filesystem on ``/data`` (an mdadm array per the
order's RAID), in fstab. Re-runnable: an array, filesystem or mount that is already ours (label
``trainyard``) is kept.

Safe: a device with partitions, a filesystem or other signature, or that belongs to an array, is
refused unless the order says ``wipe_data_devices``; then ``release_device`` frees it first: every
mount of the device, its partitions and the arrays built on them (``lsblk`` for the tree,
``findmnt`` for the mounts) is unmounted after the processes holding it are killed (``fuser -km``),
every array it belongs to is stopped (``mdadm --stop``), and only then are superblocks zeroed and
signatures erased (``wipefs -a`` fails on a busy device). Only the configure step runs the layout;
the stack step never touches ``/data``. The termination's wipe (``scripts.wipe_script``) frees the
devices the same way.
"""

from __future__ import annotations

from provisioning.stack.paths import DATA
from provisioning.stack.shell import node_script

LABEL = "trainyard"  # XFS labels are at most 12 characters (mkfs.xfs refuses longer ones)
MOUNT = DATA
LEVELS = {"raid0": "0", "raid10": "10"}



def disk_layout_script() -> str:
    return node_script("disk_layout", libs=("release_device",))


def disk_layout_env(*, devices, raid: str, wipe: bool) -> dict[str, str]:
    """What ``sh/disk_layout.sh`` lays out: a RAID level the devices cannot carry is one device."""
    devices = list(devices or ())
    raid = raid if raid in ("single", *LEVELS) else "single"
    if raid != "single" and len(devices) < 2:
        raid = "single"
    return {"TRAINYARD_DATA_DEVICES": "\n".join(devices), "TRAINYARD_RAID": raid,
            "TRAINYARD_RAID_LEVEL": LEVELS.get(raid, "0"), "TRAINYARD_WIPE": "1" if wipe else "0",
            "TRAINYARD_DATA_MOUNT": MOUNT, "TRAINYARD_DATA_LABEL": LABEL}
