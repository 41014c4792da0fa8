"""Every file the stack step puts on a node, rendered from the order, plan, node and cluster,
with the SHA-256 the stack step records and the server page offers for download."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

from provisioning.stack.accelerate import render_accelerate
from provisioning.stack.adapters import render_adapters
from provisioning.stack.data import pack_shards_tool, render_data_recipe
from provisioning.stack.deepspeed import render_deepspeed
from provisioning.stack.envfile import render_env, render_nccl_conf
from provisioning.stack.inputs import StackInputs
from provisioning.stack.launch import render_launch
from provisioning.stack.packages import constraints_text
from provisioning.stack.paths import BIN, ETC, SYNC_SERVICE, SYNC_TIMER, TENSORBOARD_SERVICE, UNITS
from provisioning.stack.torchtitan import render_torchtitan
from provisioning.stack.units import (
    render_restore_script,
    render_sync_script,
    render_sync_service,
    render_sync_timer,
    render_tensorboard_unit,
    sync_tool,
)

CONSTRAINTS_PATH = f"{ETC}/constraints.txt"


@dataclass(frozen=True)
class RenderedFile:
    name: str  # unique per node: what the download link is called
    path: str  # where it lives on the node, under $TRAINYARD_ROOT
    content: str
    mode: str = "0644"
    kind: str = "text"  # bash | yaml | json | toml | python | systemd | text

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.content.encode("utf-8")).hexdigest()

    @property
    def content_type(self) -> str:
        return {"json": "application/json", "yaml": "application/yaml",
                "toml": "application/toml"}.get(self.kind, "text/plain")


def render_files(inputs: StackInputs) -> tuple[RenderedFile, ...]:
    """The node's files, bootstrap.sh excepted (it carries these)."""
    files = [
        RenderedFile("env.sh", f"{ETC}/env.sh", render_env(inputs), kind="bash"),
        RenderedFile("nccl.conf", "/etc/nccl.conf", render_nccl_conf(inputs)),
        RenderedFile("launch.sh", f"{ETC}/launch.sh", render_launch(inputs), "0755", "bash"),
    ]
    if inputs.strategy == "fsdp":
        files.append(RenderedFile("accelerate.yaml", f"{ETC}/accelerate.yaml",
                                  render_accelerate(inputs), kind="yaml"))
    elif inputs.strategy == "deepspeed":
        files += [RenderedFile("deepspeed.json", f"{ETC}/deepspeed.json",
                               render_deepspeed(inputs), kind="json"),
                  RenderedFile("accelerate.yaml", f"{ETC}/accelerate.yaml",
                               render_accelerate(inputs), kind="yaml")]
    elif inputs.strategy == "torchtitan":
        files.append(RenderedFile("torchtitan.toml", f"{ETC}/torchtitan.toml",
                                  render_torchtitan(inputs), kind="toml"))
    if inputs.training.finetune in ("lora", "qlora"):
        files.append(RenderedFile("adapters.json", f"{ETC}/adapters.json", render_adapters(inputs),
                                  kind="json"))
    files += [
        RenderedFile("data.py", f"{ETC}/data.py", render_data_recipe(inputs), kind="python"),
        RenderedFile("pack-shards", f"{BIN}/pack-shards", pack_shards_tool(), "0755", "python"),
    ]
    if inputs.constraints:
        files.append(RenderedFile("constraints.txt", CONSTRAINTS_PATH, constraints_text()))
    if inputs.tracker == "tensorboard":
        files.append(RenderedFile(TENSORBOARD_SERVICE, f"{UNITS}/{TENSORBOARD_SERVICE}",
                                  render_tensorboard_unit(inputs), kind="systemd"))
    if inputs.storage:
        files += [
            RenderedFile("trainyard-sync.py", f"{BIN}/trainyard-sync.py", sync_tool(),
                         kind="python"),
            RenderedFile("restore-checkpoints", f"{BIN}/restore-checkpoints",
                         render_restore_script(inputs), "0755", "bash"),
        ]
    if inputs.checkpoint_timer:
        files += [
            RenderedFile("sync-checkpoints", f"{BIN}/sync-checkpoints",
                         render_sync_script(inputs), "0755", "bash"),
            RenderedFile(SYNC_SERVICE, f"{UNITS}/{SYNC_SERVICE}", render_sync_service(inputs),
                         kind="systemd"),
            RenderedFile(SYNC_TIMER, f"{UNITS}/{SYNC_TIMER}", render_sync_timer(inputs), kind="systemd"),
        ]
    return tuple(files)
