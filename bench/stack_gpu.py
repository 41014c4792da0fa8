"""The training stack on one GPU machine: FSDP2 on a ~1B-parameter Llama-style model (random
weights, synthetic tokens) through the node's launcher, measured against the estimator.

For each layout (baseline; activation checkpointing on; micro-batch doubled) it prints tokens/s,
MFU against the GPU's dense bf16 peak (catalog figure), and peak memory
(``torch.cuda.max_memory_allocated`` and ``max_memory_reserved``) against the estimator for the
same layout (the allocator's share, as bench/gpu_peak.py compares it). A few minutes on one H200.

    python bench/stack_gpu.py                 # GPU: every local GPU, the ~1B model
    python bench/stack_gpu.py --tiny          # CPU smoke: 2 gloo processes, a tiny model

The launcher is ``$TRAINYARD_ROOT/etc/trainyard/launch.sh`` when the node has one (the stack's
own, which sources env.sh); otherwise ``torchrun --standalone`` over the local GPUs, said so in
the output. Each layout runs as one launch of this file with ``--worker``; rank 0 prints one
``STACK_BENCH <json>`` line the driver reads.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "provisioning" / "acceptance" / "node"))

MARKER = "STACK_BENCH"
MODEL_1B = {"vocab": 32000, "dim": 2048, "layers": 22, "heads": 32, "kv_heads": 4, "ffn": 5632, "seq": 2048}
MODEL_TINY = {"vocab": 512, "dim": 128, "layers": 2, "heads": 4, "kv_heads": 2, "ffn": 344, "seq": 64}
LAYOUTS = (("baseline", {}), ("activation checkpointing", {"checkpointing": True}),
           ("micro-batch ×2", {"micro_batch_factor": 2}))


# --- worker: one layout under the launcher -----------------------------------------------------
def worker(args) -> int:
    import torch
    import torch.distributed as dist
    import torch.nn.functional as F
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard
    from train_smoke import Llama, ModelConfig, parameter_count

    cuda = torch.cuda.is_available() and not args.tiny
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    device = torch.device("cuda", local_rank) if cuda else torch.device("cpu")
    if cuda:
        torch.cuda.set_device(device)
    dist.init_process_group("nccl" if cuda else "gloo")
    world, rank = dist.get_world_size(), dist.get_rank()
    cfg = ModelConfig(**json.loads(args.model))
    torch.manual_seed(0)
    model = Llama(cfg, checkpoint_activations=args.checkpointing).to(device)
    params = parameter_count(model)
    mesh = init_device_mesh(device.type, (world,))
    policy = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32) if cuda else None
    for block in model.blocks:
        fully_shard(block, mesh=mesh, **({"mp_policy": policy} if policy else {}))
    fully_shard(model, mesh=mesh, **({"mp_policy": policy} if policy else {}))
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=cuda)
    tokens = torch.randint(0, cfg.vocab, (args.micro_batch, cfg.seq + 1), device=device)

    def step():
        logits = model(tokens[:, :-1])
        loss = F.cross_entropy(logits.float().view(-1, cfg.vocab), tokens[:, 1:].reshape(-1))
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)

    for _ in range(args.warmup):
        step()
    if cuda:
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
    dist.barrier()
    started = time.perf_counter()
    for _ in range(args.steps):
        step()
    if cuda:
        torch.cuda.synchronize()
    seconds = time.perf_counter() - started
    peak = torch.tensor([torch.cuda.max_memory_allocated() if cuda else 0,
                         torch.cuda.max_memory_reserved() if cuda else 0], device=device)
    dist.all_reduce(peak, op=dist.ReduceOp.MAX)
    if rank == 0:
        print(f"{MARKER} " + json.dumps({
            "world": world, "params": params, "seconds": seconds,
            "tokens_per_s": args.steps * args.micro_batch * cfg.seq * world / seconds,
            "allocated": int(peak[0].item()), "reserved": int(peak[1].item()),
            "device": torch.cuda.get_device_name() if cuda else "cpu"}), flush=True)
    dist.destroy_process_group()
    return 0


# --- driver: launch each layout, compare with the estimator -----------------------------------
def launcher(nproc: int) -> tuple[list[str], str]:
    stack = Path(os.environ.get("TRAINYARD_ROOT", "") + "/etc/trainyard/launch.sh")
    if stack.is_file() and os.access(stack, os.X_OK):
        return [str(stack)], f"the node's launcher {stack}"
    torchrun = shutil.which("torchrun") or str(Path(sys.executable).with_name("torchrun"))
    return ([torchrun, "--standalone", "--nproc-per-node", str(nproc)],
            f"torchrun --standalone --nproc-per-node {nproc} (no {stack} on this machine)")


def estimate_for(model: dict, *, micro_batch: int, checkpointing: bool, world: int):
    from portal.sizing.estimator import ModelSpec, ParallelConfig, TrainingConfig, estimate_memory
    from provisioning.acceptance.probe import allocator_bytes

    spec = ModelSpec(name="stack-bench", family="llama", vocab_size=model["vocab"],
                     hidden_size=model["dim"], num_layers=model["layers"], num_heads=model["heads"],
                     intermediate_size=model["ffn"], num_kv_heads=model["kv_heads"])
    training = TrainingConfig(precision="bf16-mixed", mixed_layout="autocast", optimizer="adamw",
                              micro_batch=micro_batch, seq_len=model["seq"],
                              checkpointing="full" if checkpointing else "none", attention="sdpa")
    parallel = ParallelConfig(dp=world, sharding="fsdp-full-shard" if world > 1 else "none")
    per_gpu = estimate_memory(spec, training, parallel).per_gpu
    return allocator_bytes(per_gpu), per_gpu.total


def bf16_peak_flops(device_name: str) -> float | None:
    """Dense bf16 peak of the GPU, from the catalog seed (names as the catalog spells them)."""
    catalog = json.loads((ROOT / "portal/catalog/data/catalog.json").read_text(encoding="utf-8"))
    name = device_name.lower()
    for gpu in sorted(catalog["gpus"], key=lambda g: -len(g["name"])):
        words = [w for w in gpu["name"].lower().replace("nvidia", "").split() if not w.endswith("gb")]
        if words and all(w in name for w in words):
            return gpu["bf16_tflops"] * 1e12
    return None


def run_layout(command: list[str], model: dict, *, micro_batch: int, checkpointing: bool,
               steps: int, warmup: int, tiny: bool) -> dict:
    cmd = [*command, str(Path(__file__).resolve()), "--worker", "--model", json.dumps(model),
           "--micro-batch", str(micro_batch), "--steps", str(steps), "--warmup", str(warmup),
           *(["--checkpointing"] if checkpointing else []), *(["--tiny"] if tiny else [])]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=900,
                          env={**os.environ, "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1")})
    lines = [x for x in proc.stdout.splitlines() if x.startswith(MARKER + " ")]
    if proc.returncode != 0 or not lines:
        tail = (proc.stdout + proc.stderr).strip().splitlines()[-15:]
        raise SystemExit("a layout failed:\n" + "\n".join(tail))
    return json.loads(lines[-1].split(" ", 1)[1])


def _params(n: int) -> str:
    return f"{n / 1e9:.2f}B" if n >= 1e9 else f"{n / 1e6:.1f}M"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--model", default="", help=argparse.SUPPRESS)
    parser.add_argument("--checkpointing", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--tiny", action="store_true", help="CPU smoke: a tiny model, 2 gloo processes")
    parser.add_argument("--micro-batch", type=int, default=0)
    parser.add_argument("--steps", type=int, default=0)
    parser.add_argument("--warmup", type=int, default=0)
    args = parser.parse_args(argv)
    if args.worker:
        return worker(args)

    import torch

    cuda = torch.cuda.is_available() and not args.tiny
    if not cuda and not args.tiny:
        print("CUDA is not available: run this on a GPU machine, or with --tiny for the CPU smoke.")
        return 1
    model = MODEL_1B if cuda else MODEL_TINY
    nproc = torch.cuda.device_count() if cuda else 2
    micro = args.micro_batch or (4 if cuda else 2)
    steps, warmup = args.steps or (10 if cuda else 3), args.warmup or (3 if cuda else 1)
    command, how = launcher(nproc)
    print(f"launcher: {how}; FSDP2 (fully_shard per block, bf16 params, fp32 reduce) "
          f"{'on ' + str(nproc) + ' GPU(s)' if cuda else 'on CPU (gloo, smoke only)'}; "
          f"{steps} timed steps after {warmup} warm-up; sequence {model['seq']}")
    print(f"{'layout':26} {'micro':>5} {'params':>8} {'tokens/s':>10} {'MFU':>6} "
          f"{'alloc GiB':>9} {'est GiB':>8} {'error':>7} {'reserved GiB':>12} {'est total GiB':>13}")
    for label, layout in LAYOUTS:
        mb = micro * layout.get("micro_batch_factor", 1)
        ckpt = layout.get("checkpointing", False)
        result = run_layout(command, model, micro_batch=mb, checkpointing=ckpt, steps=steps,
                            warmup=warmup, tiny=not cuda)
        est_alloc, est_total = estimate_for(model, micro_batch=mb, checkpointing=ckpt, world=result["world"])
        peak = bf16_peak_flops(result["device"]) if cuda else None
        # 6·N per token, plus attention (12·layers·seq·dim per token); ×4/3 with full recompute.
        flops_per_token = (6 * result["params"] + 12 * model["layers"] * model["seq"] * model["dim"])
        flops_per_token *= 4 / 3 if ckpt else 1
        mfu = (f"{flops_per_token * result['tokens_per_s'] / (peak * result['world']):6.1%}"
               if peak else f"{'n/a':>6}")
        alloc = result["allocated"]
        error = f"{est_alloc / alloc - 1:+7.1%}" if alloc else f"{'n/a':>7}"
        print(f"{label:26} {mb:>5} {_params(result['params']):>8} {result['tokens_per_s']:10.0f} {mfu} "
              f"{alloc / 2**30:9.2f} {est_alloc / 2**30:8.2f} {error} {result['reserved'] / 2**30:12.2f} "
              f"{est_total / 2**30:13.2f}")
    if not cuda:
        print("CPU smoke: no MFU and no CUDA memory figures; the numbers above say nothing about a GPU.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
