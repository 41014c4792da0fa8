"""The data recipe: DataLoader settings from the plan and the node (``data.py`` on the node, to
import from a training script), and the WebDataset shard packer (``files/pack_shards.py``)."""

from __future__ import annotations

from pathlib import Path

from provisioning.stack.inputs import StackInputs

PACK_SHARDS = Path(__file__).with_name("files") / "pack_shards.py"


def render_data_recipe(inputs: StackInputs) -> str:
    return f'''"""DataLoader settings of {inputs.hostname} (Trainyard order {inputs.order}).

    import sys; sys.path.insert(0, "/etc/trainyard")
    from data import loader_kwargs
    loader = torch.utils.data.DataLoader(dataset, **loader_kwargs())

Workers: the node's CPU cores per process, one left for the training loop (2 to 8).
Prefetch: batches each worker keeps ready (4 for micro-batches of 1-2, else 2).
Many small files? Pack them first: /opt/trainyard/bin/pack-shards SRC /data/shards
and read the shards with webdataset.WebDataset("/data/shards/shard-{{000000..000099}}.tar").
"""

MICRO_BATCH = {inputs.training.micro_batch}
NUM_WORKERS = {inputs.dataloader_workers}
PREFETCH_FACTOR = {inputs.prefetch_factor}


def loader_kwargs() -> dict:
    return {{"batch_size": MICRO_BATCH, "num_workers": NUM_WORKERS,
            "prefetch_factor": PREFETCH_FACTOR, "pin_memory": True, "persistent_workers": True}}
'''


def pack_shards_tool() -> str:
    return PACK_SHARDS.read_text(encoding="utf-8")
