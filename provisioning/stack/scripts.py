"""The shell scripts the pipeline runs on a node, one function each (the training stack's files
are rendered by ``provisioning.stack.bundle``; the disk layout by ``provisioning.stack.disk``).

Scripts read ``TRAINYARD_*`` variables the pipeline sets (order, node, rank, node count, GPUs per
node, master address) and honour ``TRAINYARD_ROOT`` (tests run them against a scratch root).
"""

from __future__ import annotations

import shlex


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
md="${{TRAINYARD_MD_DEVICE:-/dev/md/trainyard-data}}"
if command -v mountpoint >/dev/null 2>&1 && mountpoint -q "$root/data"; then
  umount "$root/data"
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
