"""DataLoader settings of gpu-01 (Trainyard order O-5EED0001).

    import sys; sys.path.insert(0, "/etc/trainyard")
    from data import loader_kwargs
    loader = torch.utils.data.DataLoader(dataset, **loader_kwargs())

Workers: the node's CPU cores per process, one left for the training loop (2 to 8).
Prefetch: batches each worker keeps ready (4 for micro-batches of 1-2, else 2).
Many small files? Pack them first: /opt/trainyard/bin/pack-shards SRC /data/shards
and read the shards with webdataset.WebDataset("/data/shards/shard-{000000..000099}.tar").
"""

MICRO_BATCH = 1
NUM_WORKERS = 8
PREFETCH_FACTOR = 4


def loader_kwargs() -> dict:
    return {"batch_size": MICRO_BATCH, "num_workers": NUM_WORKERS,
            "prefetch_factor": PREFETCH_FACTOR, "pin_memory": True, "persistent_workers": True}
