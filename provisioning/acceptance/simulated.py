"""What the simulated driver answers to an acceptance script: plausible marker lines that say
they are simulated (``"simulated": true`` and a check that names it), so a ``make run`` order
shows a full report without pretending a real job ran."""

from __future__ import annotations

import json
import math

from provisioning.acceptance.markers import JOB_MARKER, NODE_MARKER
from provisioning.acceptance.report import loss_ends
from provisioning.acceptance.scripts import BUCKET_HEADER, NODE_CHECKS, TRAIN_SMOKE

SIMULATED_CHECK = {"name": "simulated node", "status": "skip", "ok": True,
                   "detail": "simulated driver: no real job ran; the numbers are illustrative"}


def _losses(steps: int, floor: float, seed: float, pace: float) -> list[float]:
    return [round(6.2 * math.exp(-i / pace) + floor + 0.05 * math.sin(i * seed), 4) for i in range(steps)]


def simulated_lines(script: str, *, hostname: str, gpus: int, nnodes: int) -> list[str]:
    lines = []
    world = max(1, gpus) * max(1, nnodes)
    if TRAIN_SMOKE.name in script and "--workdir" in script:
        ddp, fsdp = _losses(30, 0.12, 1.3, 4.0), _losses(30, 0.05, 0.7, 6.0)
        bucket = BUCKET_HEADER in script
        job = {
            "simulated": True, "test_host": False, "world_size": world, "nnodes": nnodes,
            "device": "cuda", "autocast": "bf16",
            "versions": {"driver": "550.54.15 (simulated)", "cuda": "12.4", "torch": "2.13.0",
                         "nccl": "2.27.3", "backend": "nccl", "strategy": ""},
            "model": {"parameters": 3_164_416},
            "losses": {"ddp": ddp, "fsdp2": fsdp},
            "throughput": {"ddp_tokens_per_s": 410_000.0 * world, "fsdp2_tokens_per_s": 380_000.0 * world},
            "checkpoint": {"ok": True, "bucket": bucket, "prefix": "", "bytes": 12_670_000,
                           "tensors": 39, "mismatched": 0, "save_s": 0.2, "load_s": 0.1},
            # Nothing was measured: no bandwidth figure (the node's NCCL check says skipped).
            "bandwidths": {},
            "peak_memory_bytes": 1_180_000_000,
            "checks": [
                SIMULATED_CHECK,
                {"name": "DDP loss falls", "status": "pass", "detail":
                 "loss {:.3f} → {:.3f} (simulated)".format(*loss_ends(ddp)),
                 "value": 0.98, "threshold": 0.3, "unit": "fraction"},
                {"name": "DDP replicas identical", "status": "pass", "detail":
                 f"all {world} replicas hold the same weights after 30 steps (simulated)",
                 "value": 0.0, "threshold": 0.0},
                {"name": "FSDP2 loss falls", "status": "pass", "detail":
                 "loss {:.3f} → {:.3f} (simulated)".format(*loss_ends(fsdp)),
                 "value": 0.98, "threshold": 0.3, "unit": "fraction"},
                {"name": "sharded checkpoint round trip", "status": "pass",
                 "detail": ("39 tensors uploaded to the bucket and downloaded (simulated); 0 differ"
                            if bucket else "39 tensors saved and loaded (simulated); 0 differ"),
                 "value": 12_670_000, "unit": "bytes"},
            ],
            "passed": True,
        }
        lines.append(f"{JOB_MARKER} {json.dumps(job)}")
    if NODE_CHECKS.name in script:
        why = "simulated driver: not measured"
        checks = [{"name": n, "status": "skip", "detail": why} for n in (
            "NCCL all-reduce bus bandwidth", "DCGM diagnostics (dcgmi diag -r 1)",
            "peak memory of one step vs the estimator")]
        lines.append(f"{NODE_MARKER} {json.dumps({'node': hostname, 'checks': checks})}")
    return lines
