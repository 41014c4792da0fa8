"""Run under ``torchrun --nproc-per-node 2`` by test_train_smoke.py: train_smoke.py's distributed
pieces on 2 gloo processes, each case as the job meets it. Rank 0 writes what happened as JSON
to argv[1]."""

import json
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "provisioning/acceptance/node"))
import train_smoke as ts  # noqa: E402


def main(out: str) -> int:
    rt = ts.setup(True, timeout_s=60)
    found = {}
    # DDP replicas: equal weights pass; a replica that drifted (gradients not averaged) fails.
    torch.manual_seed(0)  # the same start on both ranks, as DDP's first broadcast makes it
    model = torch.nn.Linear(8, 4)
    found["same"] = ts.replicas_check(model, rt, steps=3)
    with torch.no_grad():
        model.weight[0, 0] += 0.25 * rt.rank
    found["drifted"] = ts.replicas_check(model, rt, steps=3)
    # One rank runs out of memory: every rank hears it, and the reason names that rank.
    def oom_on_rank_1():
        if rt.rank == 1:
            raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")
        return "fine"

    try:
        ts.phase(rt, "DDP training", oom_on_rank_1)
    except ts.JobFailed as exc:
        found["oom"] = {"check": exc.check, "detail": exc.detail()}
    ts.dist.barrier(group=rt.control)
    if rt.rank == 0:
        Path(out).write_text(json.dumps(found))
    ts.dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
