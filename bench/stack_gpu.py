"""The training stack on one GPU machine: FSDP2 on a ~1B-parameter Llama-style model (random
weights, synthetic tokens) through the stack's own rendered launcher and FSDP2 config, measured
against the estimator.

For each layout (baseline; activation checkpointing on; micro-batch doubled) it renders the
node's stack files for a plan of that layout with ``provisioning.stack`` (``env.sh``,
``launch.sh`` and the FSDP2 ``accelerate.yaml``, strategy ``fsdp``) into a scratch
``TRAINYARD_ROOT`` whose venv is this Python's, and runs ``etc/trainyard/launch.sh`` on this file
with ``--worker``. The worker applies the generated config (per-block ``fully_shard``,
``reshard_after_forward``, activation checkpointing, ``MixedPrecisionPolicy(bf16, fp32 reduce)``)
and the micro-batch from ``env.sh``. Rank 0 prints one ``STACK_BENCH <json>`` line.

It prints tokens/s, MFU against the GPU's dense bf16 peak (the catalog's figure, from
shared/reference/gpu_specs.json) and peak memory (``torch.cuda.max_memory_allocated`` and
``max_memory_reserved``) against the estimator for the same layout: FSDP2's mixed-precision
layout (``mixed_layout="fsdp2"``), full sharding over the local GPUs, the allocator's share as
bench/gpu_peak.py compares it. A few minutes on one H200.

    python bench/stack_gpu.py                 # GPU: every local GPU, the ~1B model
    python bench/stack_gpu.py --tiny          # CPU smoke: 2 gloo processes, a tiny model
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "provisioning" / "acceptance" / "node"))

MARKER = "STACK_BENCH"
MODEL_1B = {"vocab": 32000, "dim": 2048, "layers": 22, "heads": 32, "kv_heads": 4, "ffn": 5632, "seq": 2048}
MODEL_TINY = {"vocab": 512, "dim": 128, "layers": 2, "heads": 4, "kv_heads": 2, "ffn": 344, "seq": 64}
LAYOUTS = (("baseline", {"checkpointing": "none"}),
           ("activation checkpointing", {"checkpointing": "full"}),
           ("micro-batch ×2", {"checkpointing": "none", "micro_batch_factor": 2}))


# --- worker: one layout under the launcher -----------------------------------------------------
def generated_layout() -> dict:
    """What the stack's FSDP2 config and env.sh say (the launcher exported TRAINYARD_CONFIG)."""
    import yaml

    config = yaml.safe_load(Path(os.environ["TRAINYARD_CONFIG"]).read_text(encoding="utf-8"))
    fsdp = config["fsdp_config"]
    if fsdp.get("fsdp_version") != 2:
        raise SystemExit(f"{os.environ['TRAINYARD_CONFIG']} is not an FSDP2 config")
    return {"checkpointing": bool(fsdp["fsdp_activation_checkpointing"]),
            "reshard_after_forward": bool(fsdp["fsdp_reshard_after_forward"]),
            "offload": bool(fsdp["fsdp_offload_params"]),
            "bf16": config["mixed_precision"] == "bf16",
            "micro_batch": int(os.environ["TRAINYARD_MICRO_BATCH"])}


def worker(args) -> int:
    import torch
    import torch.distributed as dist
    import torch.nn.functional as F
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import CPUOffloadPolicy, MixedPrecisionPolicy, fully_shard
    from train_smoke import Llama, ModelConfig, parameter_count

    layout = generated_layout()
    cuda = torch.cuda.is_available() and not args.tiny
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    device = torch.device("cuda", local_rank) if cuda else torch.device("cpu")
    if cuda:
        torch.cuda.set_device(device)
    dist.init_process_group("nccl" if cuda else "gloo")
    world, rank = dist.get_world_size(), dist.get_rank()
    cfg = ModelConfig(**json.loads(args.model))
    torch.manual_seed(0)
    model = Llama(cfg, checkpoint_activations=layout["checkpointing"]).to(device)
    params = parameter_count(model)
    mesh = init_device_mesh(device.type, (world,))
    options = {"mesh": mesh, "reshard_after_forward": layout["reshard_after_forward"]}
    if cuda and layout["bf16"]:  # gloo on CPU has no bf16 collectives: the smoke stays fp32
        options["mp_policy"] = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
    if layout["offload"]:
        options["offload_policy"] = CPUOffloadPolicy()
    for block in model.blocks:  # the config's auto-wrap class: one decoder layer
        fully_shard(block, **options)
    fully_shard(model, **options)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=cuda)
    micro = layout["micro_batch"]
    tokens = torch.randint(0, cfg.vocab, (micro, cfg.seq + 1), device=device)

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
        line = f"{MARKER} " + json.dumps({
            "world": world, "params": params, "seconds": seconds, "micro_batch": micro,
            "layout": layout, "mixed_precision": "mp_policy" in options,
            "tokens_per_s": args.steps * micro * cfg.seq * world / seconds,
            "allocated": int(peak[0].item()), "reserved": int(peak[1].item()),
            "device": torch.cuda.get_device_name() if cuda else "cpu"}) + "\n"
        os.write(sys.stdout.fileno(), line.encode())  # one write: other ranks print too
    dist.destroy_process_group()
    return 0


# --- driver: render the stack, launch each layout, compare with the estimator -----------------
def layout_plan(model: dict, *, micro_batch: int, checkpointing: str) -> dict:
    """A plan of the kind an order carries (the keys provisioning.stack reads)."""
    return {"model": "stack-bench-1b", "micro_batch": micro_batch, "grad_accum": 1,
            "sharding": "fsdp-full-shard", "checkpointing": checkpointing,
            "precision": "bf16-mixed", "seq_len": model["seq"],
            "model_spec": {"family": "llama", "hidden_size": model["dim"]}}


def render_node(root: Path, plan: dict, *, gpus: int, test_host: bool) -> Path:
    """The stack files of a one-node ``fsdp`` order for ``plan`` under ``root``; returns the
    launcher. The node's venv is this Python's (its torchrun)."""
    from provisioning.stack.inputs import StackInputs, training_settings
    from provisioning.stack.render import render_files

    inputs = StackInputs(order="stack-bench", strategy="fsdp", tracker="",
                         training=training_settings(plan, "fsdp"), packages=(),
                         hostname=os.uname().nodename, gpus_per_node=gpus, test_host=test_host)
    for rendered in render_files(inputs):
        if rendered.name in ("env.sh", "launch.sh", "accelerate.yaml"):
            target = root / rendered.path.lstrip("/")
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(rendered.content, encoding="utf-8")
            target.chmod(int(rendered.mode, 8))
    venv = root / "opt" / "trainyard" / "venv"
    if not venv.exists():
        venv.parent.mkdir(parents=True, exist_ok=True)
        venv.symlink_to(Path(sys.prefix), target_is_directory=True)
    return root / "etc" / "trainyard" / "launch.sh"


def estimate_for(model: dict, *, micro_batch: int, checkpointing: bool, world: int,
                 reshard_after_forward: bool = True):
    """The estimator for what the worker runs: train_smoke.py's Llama (``implementation=
    "trainyard-smoke"``: what its ops save, and the logits its step keeps) under FSDP2 full
    sharding over ``world`` GPUs with ``MixedPrecisionPolicy(bf16, fp32 reduce)``
    (``mixed_layout="fsdp2"``)."""
    from portal.sizing.estimator import ModelSpec, ParallelConfig, TrainingConfig, estimate_memory
    from provisioning.acceptance.probe import allocator_bytes

    spec = ModelSpec(name="stack-bench", family="llama", vocab_size=model["vocab"],
                     hidden_size=model["dim"], num_layers=model["layers"], num_heads=model["heads"],
                     intermediate_size=model["ffn"], num_kv_heads=model["kv_heads"],
                     implementation="trainyard-smoke")
    training = TrainingConfig(precision="bf16-mixed", mixed_layout="fsdp2", optimizer="adamw",
                              micro_batch=micro_batch, seq_len=model["seq"],
                              checkpointing="full" if checkpointing else "none", attention="sdpa")
    parallel = ParallelConfig(dp=world, sharding="fsdp-full-shard",
                              reshard_after_forward=reshard_after_forward)
    per_gpu = estimate_memory(spec, training, parallel).per_gpu
    return allocator_bytes(per_gpu), per_gpu.total


# --- the GPU's dense bf16 peak -----------------------------------------------------------------
_FORM_WORDS = {"sxm": "sxm", "sxm4": "sxm", "sxm5": "sxm", "sxm6": "sxm", "pcie": "pcie", "nvl": "nvl"}


def _words(name: str) -> list[str]:
    name = re.sub(r"\(.*?\)", " ", name.lower())  # "(HGX, 1000W)"
    return [w for w in re.split(r"[^a-z0-9]+", name) if w and w != "nvidia"]


def _model_words(words: list[str]) -> list[str]:
    return [w for w in words if w not in _FORM_WORDS and not re.fullmatch(r"\d+gb|hbm\d*e?", w)]


def _form(words: list[str]) -> str:
    """sxm | pcie | nvl, or "" when the name does not say."""
    return next((_FORM_WORDS[w] for w in words if w in _FORM_WORDS), "")


def catalog_gpu(device_name: str, gpus: list[dict]) -> dict | None:
    """The catalog GPU that ``torch.cuda.get_device_name`` names ("NVIDIA H200", "NVIDIA H100
    80GB HBM3", "NVIDIA A100-SXM4-80GB", "NVIDIA B200", …): every model word of the catalog
    name must be a word of the device name; the form factor must agree (a device name without
    one is the SXM part: NVIDIA names PCIe and NVL parts so); then the memory size decides."""
    words = _words(device_name)
    form = _form(words) or "sxm"
    memory = next((w for w in words if re.fullmatch(r"\d+gb", w)), "")
    best, best_score = None, -1
    for gpu in gpus:
        theirs = _words(gpu["name"])
        model = _model_words(theirs)
        if not model or not all(w in words for w in model):
            continue
        their_form = _form(theirs)
        if their_form and their_form != form:
            continue
        score = len(model) * 10 + (2 if their_form else 0) + (1 if memory and memory in theirs else 0)
        if score > best_score:
            best, best_score = gpu, score
    return best


def bf16_peak_flops(device_name: str) -> float | None:
    """Dense bf16 peak of the GPU in FLOP/s, from the catalog seed; None for a GPU it lacks."""
    catalog = json.loads((ROOT / "portal/catalog/data/catalog.json").read_text(encoding="utf-8"))
    gpu = catalog_gpu(device_name, catalog["gpus"])
    return gpu["bf16_tflops"] * 1e12 if gpu else None


# --- the table ---------------------------------------------------------------------------------
def run_layout(launcher: Path, model: dict, *, steps: int, warmup: int, tiny: bool) -> dict:
    cmd = [str(launcher), str(Path(__file__).resolve()), "--worker", "--model", json.dumps(model),
           "--steps", str(steps), "--warmup", str(warmup), *(["--tiny"] if tiny else [])]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=900,
                          env={**os.environ, "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1")})
    lines = [x[x.index(MARKER):] for x in proc.stdout.splitlines() if MARKER + " " in x]
    if proc.returncode != 0 or not lines:
        tail = (proc.stdout + proc.stderr).strip().splitlines()[-15:]
        raise SystemExit(f"a layout failed ({launcher} exited {proc.returncode}):\n" + "\n".join(tail))
    return json.loads(lines[-1].split(" ", 1)[1])


def _params(n: int) -> str:
    return f"{n / 1e9:.2f}B" if n >= 1e9 else f"{n / 1e6:.1f}M"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--model", default="", help=argparse.SUPPRESS)
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
    gpus = torch.cuda.device_count() if cuda else 1
    micro = args.micro_batch or (4 if cuda else 2)
    steps, warmup = args.steps or (10 if cuda else 3), args.warmup or (3 if cuda else 1)
    device = torch.cuda.get_device_name() if cuda else "cpu"
    peak = bf16_peak_flops(device) if cuda else None
    print(f"launcher: the stack's rendered launch.sh (strategy fsdp, FSDP2 accelerate.yaml) on "
          f"{f'{gpus} × {device}' if cuda else 'CPU (a declared test host: 2 gloo processes, smoke only)'}"
          f"; bf16 peak {f'{peak / 1e12:.0f} TFLOPS (catalog)' if peak else 'unknown'}; "
          f"{steps} timed steps after {warmup} warm-up; sequence {model['seq']}")
    print(f"{'layout':26} {'micro':>5} {'params':>8} {'tokens/s':>10} {'MFU':>6} "
          f"{'alloc GiB':>9} {'est GiB':>8} {'error':>7} {'reserved GiB':>12} {'est total GiB':>13}")
    with tempfile.TemporaryDirectory(prefix="stack-bench-") as scratch:
        for i, (label, layout) in enumerate(LAYOUTS):
            mb = micro * layout.get("micro_batch_factor", 1)
            plan = layout_plan(model, micro_batch=mb, checkpointing=layout["checkpointing"])
            launcher = render_node(Path(scratch) / f"root-{i}", plan, gpus=gpus, test_host=not cuda)
            result = run_layout(launcher, model, steps=steps, warmup=warmup, tiny=not cuda)
            ran = result["layout"]
            est_alloc, est_total = estimate_for(model, micro_batch=result["micro_batch"],
                                                checkpointing=ran["checkpointing"], world=result["world"],
                                                reshard_after_forward=ran["reshard_after_forward"])
            # 6·N per token, plus attention (12·layers·seq·dim per token); ×4/3 with full recompute.
            flops_per_token = (6 * result["params"] + 12 * model["layers"] * model["seq"] * model["dim"])
            flops_per_token *= 4 / 3 if ran["checkpointing"] else 1
            mfu = (f"{flops_per_token * result['tokens_per_s'] / (peak * result['world']):6.1%}"
                   if peak else f"{'n/a':>6}")
            alloc = result["allocated"]
            error = f"{est_alloc / alloc - 1:+7.1%}" if alloc else f"{'n/a':>7}"
            print(f"{label:26} {result['micro_batch']:>5} {_params(result['params']):>8} "
                  f"{result['tokens_per_s']:10.0f} {mfu} {alloc / 2**30:9.2f} {est_alloc / 2**30:8.2f} "
                  f"{error} {result['reserved'] / 2**30:12.2f} {est_total / 2**30:13.2f}")
    if not cuda:
        print("CPU smoke: no MFU and no CUDA memory figures (fp32, no bf16 policy on gloo); the "
              "numbers above say nothing about a GPU.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
