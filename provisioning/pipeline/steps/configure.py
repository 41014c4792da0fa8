"""Configure: the data disk layout (``stack.disk``): the NVMe data devices as XFS on ``/data``,
an mdadm array per the order's RAID. A device that holds anything not ours is refused unless the
order's ``wipe_data_devices`` flag is set."""

from __future__ import annotations

from dataclasses import dataclass

from provisioning.pipeline.context import StepContext, StepResult
from provisioning.stack.disk import MOUNT, disk_layout_env, disk_layout_script


@dataclass(frozen=True)
class ConfigureResult(StepResult):
    nvme: str = ""
    network: str = ""
    raid: str = ""
    devices: tuple[str, ...] = ()
    mount: str = MOUNT
    wiped_allowed: bool = False
    exit_status: int = 0


def configure(ctx: StepContext) -> ConfigureResult:
    order, node = ctx.order, ctx.node
    raid = order.nvme.raid
    wipe = bool(getattr(order, "wipe_data_devices", False))
    ctx.log(f"NVMe: {order.nvme} on {len(node.nvme_devices)} device(s); network: {order.network}")
    ctx.run_script(disk_layout_script(), name="configure",
                   env=disk_layout_env(devices=node.nvme_devices, raid=raid, wipe=wipe))
    ctx.say(f"Data disks ready on {MOUNT} ({order.nvme})")
    return ConfigureResult(nvme=str(order.nvme), network=str(order.network), raid=raid,
                           devices=tuple(node.nvme_devices), wiped_allowed=wipe,
                           exit_status=ctx.result.get("exit_status", 0))
