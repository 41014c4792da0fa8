#!/usr/bin/env python3
"""Acceptance checks of one node's GPUs, run once per node with the stack's Python (no torchrun):

- ``nccl-tests``: ``all_reduce_perf`` over all local GPUs; its average bus bandwidth against the
  SKU's baseline (``--baseline-busbw-gbps``, from ``ServerSKU.nccl_busbw_gbps``).
- DCGM: ``dcgmi diag -r 1`` when DCGM is installed.
- memory: one training step of the plan's own layout at reduced depth on GPU 0 (``--probe``, a
  JSON object with the model's shape, micro-batch, sequence length, activation checkpointing
  and the estimator's bytes for that same layout); peak ``max_memory_allocated`` against it.

On a declared test host (``TRAINYARD_TEST_HOST=1``) every check is skipped with that reason;
nothing is faked. Prints ONE line ``TRAINYARD_NODE_CHECKS <json>``; exits 1 when a check fails.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

MARKER = "TRAINYARD_NODE_CHECKS"
BUSBW_LINE = re.compile(r"Avg bus bandwidth\s*:\s*([0-9.]+)")


def check(name: str, ok: bool | None, detail: str, **numbers) -> dict:
    status = "skip" if ok is None else ("pass" if ok else "fail")
    return {"name": name, "status": status, "ok": ok is not False, "detail": detail, **numbers}


def find_tool(name: str) -> str | None:
    root = os.environ.get("TRAINYARD_ROOT", "")
    for candidate in (f"{root}/opt/nccl-tests/build/{name}", f"{root}/opt/trainyard/bin/{name}"):
        if os.access(candidate, os.X_OK):
            return candidate
    return shutil.which(name)


def nccl_allreduce(gpus: int, baseline_gbps: float, min_fraction: float) -> dict:
    name = "NCCL all-reduce bus bandwidth"
    if gpus < 2:
        return check(name, None, f"{gpus} GPU: no intra-node all-reduce to measure")
    tool = find_tool("all_reduce_perf")
    if tool is None:
        return check(name, False, "nccl-tests all_reduce_perf is not installed "
                                  "($TRAINYARD_ROOT/opt/nccl-tests/build or PATH)")
    proc = subprocess.run([tool, "-b", "8M", "-e", "1G", "-f", "2", "-g", str(gpus)],
                          capture_output=True, text=True, timeout=600)
    match = BUSBW_LINE.search(proc.stdout)
    if proc.returncode != 0 or not match:
        last = (proc.stdout + proc.stderr).strip().splitlines()[-1:] or ["no output"]
        return check(name, False, f"all_reduce_perf exited {proc.returncode}: {last[0][:200]}")
    busbw = float(match.group(1))
    if not baseline_gbps:
        return check(name, None, f"{busbw:.1f} GB/s measured; this SKU has no baseline to compare",
                     value=busbw, unit="GB/s")
    floor = baseline_gbps * min_fraction
    return check(name, busbw >= floor,
                 f"{busbw:.1f} GB/s (baseline {baseline_gbps:.0f} GB/s, at least {floor:.0f} GB/s)",
                 value=busbw, threshold=floor, baseline=baseline_gbps, unit="GB/s")


def dcgm_diag() -> dict:
    name = "DCGM diagnostics (dcgmi diag -r 1)"
    tool = shutil.which("dcgmi")
    if tool is None:
        return check(name, None, "DCGM is not installed on this node")
    proc = subprocess.run([tool, "diag", "-r", "1"], capture_output=True, text=True, timeout=600)
    failed = [line.strip() for line in proc.stdout.splitlines() if "Fail" in line]
    ok = proc.returncode == 0 and not failed
    detail = "all level-1 tests passed" if ok else (failed[0][:200] if failed else
                                                    f"dcgmi exited {proc.returncode}")
    return check(name, ok, detail)


def memory_probe(probe: dict, tolerance: float) -> dict:
    """One forward/backward/AdamW step of the probe layout on GPU 0, bf16 autocast."""
    name = "peak memory of one step vs the estimator"
    import torch  # the stack's torch; imported here so the other checks run without it
    import torch.nn.functional as F

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from train_smoke import Llama, ModelConfig

    cfg = ModelConfig(vocab=probe["vocab"], dim=probe["hidden"], layers=probe["layers"],
                      heads=probe["heads"], kv_heads=probe["kv_heads"], ffn=probe["ffn"],
                      seq=probe["seq"])
    device = torch.device("cuda", 0)
    torch.cuda.reset_peak_memory_stats(device)
    model = Llama(cfg, checkpoint_activations=probe.get("checkpointing") == "full").to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    tokens = torch.randint(0, cfg.vocab, (probe["micro_batch"], cfg.seq + 1), device=device)
    for _ in range(2):  # the second step has the optimizer states in place
        with torch.autocast("cuda", dtype=torch.bfloat16):
            logits = model(tokens[:, :-1])
        loss = F.cross_entropy(logits.float().view(-1, cfg.vocab), tokens[:, 1:].reshape(-1))
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
    torch.cuda.synchronize(device)
    peak = torch.cuda.max_memory_allocated(device)
    reserved = torch.cuda.max_memory_reserved(device)
    estimate = int(probe["estimate_bytes"])
    ratio = peak / estimate if estimate else 0.0
    return check(name, abs(ratio - 1) <= tolerance,
                 f"{peak / 2**30:.2f} GiB measured vs {estimate / 2**30:.2f} GiB estimated "
                 f"({ratio:.2f}×, within ±{tolerance:.0%} needed) for {probe['layers']} layer(s), "
                 f"micro-batch {probe['micro_batch']}, sequence {probe['seq']}",
                 value=peak, reserved=reserved, estimate=estimate, ratio=round(ratio, 3),
                 unit="bytes")


def run_checks(args) -> list[dict]:
    if os.environ.get("TRAINYARD_TEST_HOST") == "1":
        why = "test host (TRAINYARD_TEST_HOST=1): no GPUs by declaration"
        return [check("NCCL all-reduce bus bandwidth", None, why),
                check("DCGM diagnostics (dcgmi diag -r 1)", None, why),
                check("peak memory of one step vs the estimator", None, why)]
    checks = [nccl_allreduce(args.gpus, args.baseline_busbw_gbps, args.min_busbw_fraction),
              dcgm_diag()]
    probe = json.loads(args.probe) if args.probe else None
    if not probe:
        checks.append(check("peak memory of one step vs the estimator", None,
                            args.probe_skip_reason or "no plan layout to probe"))
    else:
        try:
            checks.append(memory_probe(probe, args.memory_tolerance))
        except Exception as exc:  # an OOM or a missing CUDA is this check's failure, with its words
            checks.append(check("peak memory of one step vs the estimator", False,
                                f"{type(exc).__name__}: {str(exc)[:200]}"))
    return checks


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description="Trainyard acceptance: one node's GPU checks")
    parser.add_argument("--gpus", type=int, required=True)
    parser.add_argument("--baseline-busbw-gbps", type=float, default=0.0)
    parser.add_argument("--min-busbw-fraction", type=float, default=0.8)
    parser.add_argument("--probe", default="", help="JSON: the reduced-depth layout and its estimate")
    parser.add_argument("--probe-skip-reason", default="")
    parser.add_argument("--memory-tolerance", type=float, default=0.25)
    args = parser.parse_args(argv)
    checks = run_checks(args)
    print(f"{MARKER} {json.dumps({'node': os.environ.get('TRAINYARD_NODE', ''), 'checks': checks})}",
          flush=True)
    return 1 if any(c["status"] == "fail" for c in checks) else 0


if __name__ == "__main__":
    sys.exit(main())
