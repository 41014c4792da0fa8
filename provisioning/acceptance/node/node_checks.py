#!/usr/bin/env python3
"""Acceptance checks of one node's GPUs, run once per node with the stack's Python (no torchrun):

- ``nccl-tests``: ``all_reduce_perf`` over all local GPUs; its average bus bandwidth against the
  SKU's baseline (``--baseline-busbw-gbps``, from ``ServerSKU.nccl_busbw_gbps``). The stack's
  bootstrap builds it on GPU nodes into ``$TRAINYARD_ROOT/opt/trainyard/nccl-tests/build``
  (looked at first), else it is found on PATH.
- DCGM: ``dcgmi diag -r 1`` when DCGM is installed.
- memory: one training step of the plan's own layout at reduced depth on GPU 0 (``--probe``, a
  JSON object with the model's shape, micro-batch, sequence length, activation checkpointing
  and the estimator's bytes for that same layout); peak ``max_memory_allocated`` against it.

On a declared test host (``TRAINYARD_TEST_HOST=1``) every check is skipped with that reason;
nothing is faked. A check that crashes or whose tool hangs (``--tool-timeout-s``) fails with the
reason. Prints ONE line ``TRAINYARD_NODE_CHECKS <json>`` (in one write); exits 1 when a check
fails.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import shutil
import signal
import subprocess
import sys
import traceback
from pathlib import Path

MARKER = "TRAINYARD_NODE_CHECKS"
BUSBW_LINE = re.compile(r"Avg bus bandwidth\s*:\s*([0-9.]+)")
NCCL_TESTS_BUILD = "/opt/trainyard/nccl-tests/build"  # under $TRAINYARD_ROOT; the bootstrap's
NCCL_CHECK = "NCCL all-reduce bus bandwidth"
DCGM_CHECK = "DCGM diagnostics (dcgmi diag -r 1)"
MEMORY_CHECK = "peak memory of one step vs the estimator"


def check(name: str, ok: bool | None, detail: str, **numbers) -> dict:
    status = "skip" if ok is None else ("pass" if ok else "fail")
    return {"name": name, "status": status, "ok": ok is not False, "detail": detail, **numbers}


def nccl_tests_path(name: str) -> str:
    return f"{os.environ.get('TRAINYARD_ROOT', '')}{NCCL_TESTS_BUILD}/{name}"


def find_tool(name: str) -> str | None:
    """nccl-tests' ``name`` where the bootstrap builds it, else on PATH."""
    built = nccl_tests_path(name)
    if os.access(built, os.X_OK):
        return built
    return shutil.which(name)


def run_tool(argv: list[str], timeout_s: float) -> tuple[int | None, str]:
    """(exit status, stdout + stderr); status None when the tool outlived ``timeout_s`` (then
    it and everything it started are killed: a child holding the pipe would keep us waiting)."""
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True)
    try:
        output, _ = proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        return None, ""
    return proc.returncode, output


def nccl_allreduce(gpus: int, baseline_gbps: float, min_fraction: float, timeout_s: float) -> dict:
    name = NCCL_CHECK
    if gpus < 2:
        return check(name, None, f"{gpus} GPU: no intra-node all-reduce to measure")
    tool = find_tool("all_reduce_perf")
    if tool is None:
        return check(name, False, f"nccl-tests all_reduce_perf is not installed: expected at "
                                  f"{nccl_tests_path('all_reduce_perf')} (built by the stack's "
                                  "bootstrap) or on PATH")
    status, output = run_tool([tool, "-b", "8M", "-e", "1G", "-f", "2", "-g", str(gpus)], timeout_s)
    if status is None:
        return check(name, False, f"all_reduce_perf did not finish within {timeout_s:.0f} s")
    match = BUSBW_LINE.search(output)
    if status != 0 or not match:
        last = output.strip().splitlines()[-1:] or ["no output"]
        return check(name, False, f"all_reduce_perf exited {status}: {last[0][:200]}")
    busbw = float(match.group(1))
    if not baseline_gbps:
        return check(name, None, f"{busbw:.1f} GB/s measured; this SKU has no baseline to compare",
                     value=busbw, unit="GB/s")
    floor = baseline_gbps * min_fraction
    return check(name, busbw >= floor,
                 f"{busbw:.1f} GB/s (baseline {baseline_gbps:.0f} GB/s, at least {floor:.0f} GB/s)",
                 value=busbw, threshold=floor, baseline=baseline_gbps, unit="GB/s")


def dcgm_diag(timeout_s: float) -> dict:
    name = DCGM_CHECK
    tool = shutil.which("dcgmi")
    if tool is None:
        return check(name, None, "DCGM is not installed on this node")
    status, output = run_tool([tool, "diag", "-r", "1"], timeout_s)
    if status is None:
        return check(name, False, f"dcgmi diag -r 1 did not finish within {timeout_s:.0f} s")
    failed = [line.strip() for line in output.splitlines() if "Fail" in line]
    ok = status == 0 and not failed
    detail = "all level-1 tests passed" if ok else (failed[0][:200] if failed else
                                                    f"dcgmi exited {status}")
    return check(name, ok, detail)


def memory_probe(probe: dict, tolerance: float) -> dict:
    """One forward/backward/AdamW step of the probe layout on GPU 0, bf16 autocast."""
    name = MEMORY_CHECK
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


def guarded(name: str, fn, *args) -> dict:
    """``fn(*args)``; a crash (out of memory, no CUDA, a tool that cannot start) is the check's
    failure in words, the traceback goes to stderr (the step log)."""
    try:
        return fn(*args)
    except Exception as exc:  # noqa: BLE001 - every crash becomes this check's reason
        traceback.print_exc(file=sys.stderr)
        first = (str(exc).strip().splitlines() or [""])[0][:200]
        if type(exc).__name__ == "OutOfMemoryError":
            return check(name, False, f"out of GPU memory ({first})")
        return check(name, False, f"{type(exc).__name__}: {first}" if first else type(exc).__name__)


def run_checks(args) -> list[dict]:
    if os.environ.get("TRAINYARD_TEST_HOST") == "1":
        why = "test host (TRAINYARD_TEST_HOST=1): no GPUs by declaration"
        return [check(NCCL_CHECK, None, why), check(DCGM_CHECK, None, why), check(MEMORY_CHECK, None, why)]
    checks = [guarded(NCCL_CHECK, nccl_allreduce, args.gpus, args.baseline_busbw_gbps,
                      args.min_busbw_fraction, args.tool_timeout_s),
              guarded(DCGM_CHECK, dcgm_diag, args.tool_timeout_s)]
    probe = json.loads(args.probe) if args.probe else None
    if not probe:
        checks.append(check(MEMORY_CHECK, None, args.probe_skip_reason or "no plan layout to probe"))
    else:
        checks.append(guarded(MEMORY_CHECK, memory_probe, probe, args.memory_tolerance))
    return checks


def finite(value):
    """``value`` with every non-finite float as None: JSON (and PostgreSQL) have no NaN."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: finite(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [finite(v) for v in value]
    return value


def print_line(text: str) -> None:
    """``text`` and its newline in one write (print() makes two when stdout is unbuffered)."""
    sys.stdout.flush()
    data = (text + "\n").encode()
    while data:
        data = data[os.write(sys.stdout.fileno(), data):]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description="Trainyard acceptance: one node's GPU checks")
    parser.add_argument("--gpus", type=int, required=True)
    parser.add_argument("--baseline-busbw-gbps", type=float, default=0.0)
    parser.add_argument("--min-busbw-fraction", type=float, default=0.8)
    parser.add_argument("--probe", default="", help="JSON: the reduced-depth layout and its estimate")
    parser.add_argument("--probe-skip-reason", default="")
    parser.add_argument("--memory-tolerance", type=float, default=0.25)
    parser.add_argument("--tool-timeout-s", type=float, default=600.0,
                        help="how long all_reduce_perf and dcgmi may run")
    args = parser.parse_args(argv)
    checks = run_checks(args)
    payload = {"node": os.environ.get("TRAINYARD_NODE", ""), "checks": finite(checks)}
    print_line(f"{MARKER} {json.dumps(payload, allow_nan=False)}")
    return 1 if any(c["status"] == "fail" for c in checks) else 0


if __name__ == "__main__":
    sys.exit(main())
