"""The shell scripts the pipeline runs on a node, one function each (the training stack's files
are rendered by ``provisioning.stack.bundle``; the disk layout by ``provisioning.stack.disk``).

Scripts read ``TRAINYARD_*`` variables the pipeline sets (order, node, rank, node count, GPUs per
node, master address) and honour ``TRAINYARD_ROOT`` (tests run them against a scratch root).
"""

from __future__ import annotations

import shlex


def configure_script(order, node) -> str:
    """NVMe layout (array, filesystem, mount) and network checks. Re-runnable: each part checks
    what is already there and skips it, so a retried step on real hardware does not fail on its
    own earlier work. ``TRAINYARD_MD_DEVICE`` names the array (default ``/dev/md0``); the data
    mount is ``$TRAINYARD_ROOT/mnt/nvme``."""
    devices = " ".join(shlex.quote(d) for d in node.nvme_devices)
    raid = order.nvme.raid
    level = 0 if raid == "raid0" else 10
    first = shlex.quote(node.nvme_devices[0]) if node.nvme_devices else "''"
    return f"""#!/bin/sh
set -eu
echo "configuring $TRAINYARD_NODE for order $TRAINYARD_ORDER"
echo "NVMe: {order.nvme} on {len(node.nvme_devices)} device(s): {devices or 'none recorded'}"
root="${{TRAINYARD_ROOT:-}}"
md="${{TRAINYARD_MD_DEVICE:-/dev/md0}}"
data=""
if [ -n "{devices}" ] && command -v mdadm >/dev/null 2>&1 && [ "{raid}" != "single" ]; then
  if mdadm --detail "$md" >/dev/null 2>&1; then
    echo "array $md already assembled; skipping mdadm --create"
  else
    mdadm --create "$md" --run --level={level} --raid-devices={len(node.nvme_devices)} {devices}
  fi
  data="$md"
elif [ -n "{devices}" ]; then
  data={first}
fi
if [ -n "$data" ] && [ -e "$data" ] && command -v mkfs.ext4 >/dev/null 2>&1; then
  if blkid "$data" >/dev/null 2>&1; then
    echo "$data already has a filesystem; skipping mkfs"
  else
    mkfs.ext4 -q -L trainyard-data "$data"
  fi
  mkdir -p "$root/mnt/nvme"
  if mountpoint -q "$root/mnt/nvme"; then
    echo "$root/mnt/nvme already mounted; skipping mount"
  else
    mount "$data" "$root/mnt/nvme"
  fi
fi
echo "network: {order.network} ({order.network.kind}, {order.network.speed_gbps} Gb/s)"
if [ "{order.network.kind}" = "infiniband" ]; then
  command -v ibstat >/dev/null 2>&1 || {{ echo "ibstat not found: no InfiniBand stack"; exit 3; }}
  ibstat | grep -q "State: Active" || {{ echo "no active InfiniBand port"; exit 4; }}
fi
echo "configure done"
"""


def acceptance_script(expected_gpus: int) -> str:
    return f"""#!/bin/sh
set -eu
echo "acceptance: expecting {expected_gpus} GPU(s)"
command -v nvidia-smi >/dev/null 2>&1 || {{ echo "nvidia-smi not found: no GPU driver"; exit 2; }}
found=$(nvidia-smi --query-gpu=name --format=csv,noheader | wc -l)
echo "found $found GPU(s)"
[ "$found" -eq {expected_gpus} ] || {{ echo "expected {expected_gpus} GPUs, found $found"; exit 1; }}
echo "acceptance passed"
"""


def revoke_script() -> str:
    return """#!/bin/sh
set -eu
echo "revoking customer SSH access"
root="${TRAINYARD_ROOT:-}"
rm -f "$root/etc/trainyard/authorized_keys"
echo "customer keys removed"
"""


def wipe_script(devices: list[str]) -> str:
    """Unmounts the data mount and stops the array if they are there, then discards every
    device. Re-runnable: what is already unmounted or stopped is skipped."""
    if not devices:
        return '#!/bin/sh\necho "no NVMe data devices recorded on this node; nothing to wipe"\n'
    quoted = " ".join(shlex.quote(d) for d in devices)
    return f"""#!/bin/sh
set -eu
root="${{TRAINYARD_ROOT:-}}"
md="${{TRAINYARD_MD_DEVICE:-/dev/md0}}"
if command -v mountpoint >/dev/null 2>&1 && mountpoint -q "$root/mnt/nvme"; then
  umount "$root/mnt/nvme"
fi
if command -v mdadm >/dev/null 2>&1 && mdadm --detail "$md" >/dev/null 2>&1; then
  mdadm --stop "$md"
fi
for dev in {quoted}; do
  echo "wiping $dev"
  if command -v blkdiscard >/dev/null 2>&1; then blkdiscard -f "$dev"; else
    echo "blkdiscard not found: cannot wipe $dev"; exit 5; fi
done
echo "wipe done"
"""
