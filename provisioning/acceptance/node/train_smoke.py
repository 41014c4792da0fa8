#!/usr/bin/env python3
"""Acceptance train-smoke: proves a node (or a cluster) trains. Run under torchrun:

    launch.sh train_smoke.py --sync-tool sync.py --workdir DIR --prefix acceptance/run-7

A small Llama-style transformer (RMSNorm, rotary embeddings, SwiGLU) is trained for a few dozen
steps with DDP, then again with FSDP2 (``fully_shard``); the loss must fall both times. The
FSDP2 model is saved as a sharded ``torch.distributed.checkpoint``, uploaded to the order's
bucket with the sync tool, downloaded into a fresh directory, loaded into a fresh model, and
the weights compared. Rank 0 prints ONE line ``TRAINYARD_ACCEPTANCE_REPORT <json>``.

Device and backend are never guessed: with ``TRAINYARD_TEST_HOST=1`` (a declared CPU test
host) it runs on CPU with gloo; otherwise it needs CUDA and NCCL, and a torch without CUDA
fails the "CUDA available" check with that reason. Only torch and the standard library are
needed; the bucket settings come from ``$TRAINYARD_ROOT/etc/trainyard/s3.env`` (exported by
the caller), read by the sync tool through boto3's usual variables.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import math
import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
import torch.nn as nn
import torch.nn.functional as F
import torch.utils.checkpoint
from torch.distributed.checkpoint.state_dict import get_model_state_dict, set_model_state_dict
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import fully_shard
from torch.nn.parallel import DistributedDataParallel

MARKER = "TRAINYARD_ACCEPTANCE_REPORT"
STACK_PACKAGES = ("torch", "accelerate", "deepspeed", "torchtitan", "transformers")


# --- the model ---------------------------------------------------------------------------------
@dataclass(frozen=True)
class ModelConfig:
    vocab: int = 512
    dim: int = 256
    layers: int = 4
    heads: int = 4
    kv_heads: int = 2
    ffn: int = 688
    seq: int = 64


class RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float = 1e-6):
        super().__init__()
        self.eps, self.weight = eps, nn.Parameter(torch.ones(dim))

    def forward(self, x):
        normed = x.float() * torch.rsqrt(x.float().pow(2).mean(-1, keepdim=True) + self.eps)
        return normed.type_as(x) * self.weight


def rotary_tables(head_dim: int, seq: int, theta: float = 10000.0):
    inv = 1.0 / theta ** (torch.arange(0, head_dim, 2).float() / head_dim)
    angles = torch.outer(torch.arange(seq).float(), inv)
    return angles.cos(), angles.sin()


def apply_rotary(x, cos, sin):  # x: (batch, heads, seq, head_dim)
    x1, x2 = x[..., 0::2], x[..., 1::2]
    cos, sin = cos[: x.shape[-2]].to(x.dtype), sin[: x.shape[-2]].to(x.dtype)
    return torch.stack((x1 * cos - x2 * sin, x1 * sin + x2 * cos), dim=-1).flatten(-2)


class Attention(nn.Module):
    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.heads, self.kv_heads, self.head_dim = cfg.heads, cfg.kv_heads, cfg.dim // cfg.heads
        self.wq = nn.Linear(cfg.dim, cfg.heads * self.head_dim, bias=False)
        self.wk = nn.Linear(cfg.dim, cfg.kv_heads * self.head_dim, bias=False)
        self.wv = nn.Linear(cfg.dim, cfg.kv_heads * self.head_dim, bias=False)
        self.wo = nn.Linear(cfg.heads * self.head_dim, cfg.dim, bias=False)

    def forward(self, x, cos, sin):
        b, s, _ = x.shape
        q = self.wq(x).view(b, s, self.heads, self.head_dim).transpose(1, 2)
        k = self.wk(x).view(b, s, self.kv_heads, self.head_dim).transpose(1, 2)
        v = self.wv(x).view(b, s, self.kv_heads, self.head_dim).transpose(1, 2)
        q, k = apply_rotary(q, cos, sin), apply_rotary(k, cos, sin)
        repeat = self.heads // self.kv_heads
        k, v = k.repeat_interleave(repeat, dim=1), v.repeat_interleave(repeat, dim=1)
        out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.wo(out.transpose(1, 2).reshape(b, s, -1))


class SwiGLU(nn.Module):
    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.w1 = nn.Linear(cfg.dim, cfg.ffn, bias=False)
        self.w3 = nn.Linear(cfg.dim, cfg.ffn, bias=False)
        self.w2 = nn.Linear(cfg.ffn, cfg.dim, bias=False)

    def forward(self, x):
        return self.w2(F.silu(self.w1(x)) * self.w3(x))


class Block(nn.Module):
    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.attn_norm, self.attn = RMSNorm(cfg.dim), Attention(cfg)
        self.ffn_norm, self.ffn = RMSNorm(cfg.dim), SwiGLU(cfg)

    def forward(self, x, cos, sin):
        x = x + self.attn(self.attn_norm(x), cos, sin)
        return x + self.ffn(self.ffn_norm(x))


class Llama(nn.Module):
    def __init__(self, cfg: ModelConfig, *, checkpoint_activations: bool = False):
        super().__init__()
        self.embed = nn.Embedding(cfg.vocab, cfg.dim)
        self.blocks = nn.ModuleList(Block(cfg) for _ in range(cfg.layers))
        self.norm = RMSNorm(cfg.dim)
        self.head = nn.Linear(cfg.dim, cfg.vocab, bias=False)
        cos, sin = rotary_tables(cfg.dim // cfg.heads, cfg.seq)
        self.register_buffer("cos", cos, persistent=False)
        self.register_buffer("sin", sin, persistent=False)
        self.checkpoint_activations = checkpoint_activations

    def forward(self, tokens):
        x = self.embed(tokens)
        for block in self.blocks:
            if self.checkpoint_activations and self.training:
                x = torch.utils.checkpoint.checkpoint(block, x, self.cos, self.sin, use_reentrant=False)
            else:
                x = block(x, self.cos, self.sin)
        return self.head(self.norm(x))


def parameter_count(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())


# --- data: a learnable synthetic language ------------------------------------------------------
def batches(cfg: ModelConfig, *, batch: int, rank: int, device):
    """Sequences that follow a fixed affine rule mod vocab from a random start: a model that
    learns the rule predicts every next token, so a working trainer drives the loss down fast."""
    generator = torch.Generator().manual_seed(1234 + rank)
    steps = torch.arange(cfg.seq + 1)
    while True:
        start = torch.randint(0, cfg.vocab, (batch, 1), generator=generator)
        seqs = (start * 1 + steps * 7) % cfg.vocab
        yield seqs[:, :-1].to(device), seqs[:, 1:].to(device)


# --- runtime -----------------------------------------------------------------------------------
@dataclass
class Runtime:
    device: torch.device
    backend: str
    rank: int
    world: int
    local_rank: int
    autocast: torch.dtype | None
    test_host: bool


def setup(test_host: bool) -> Runtime:
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    if test_host:
        device, backend = torch.device("cpu"), "gloo"
    else:
        if not torch.cuda.is_available():
            raise NodeUnfit("CUDA available", f"torch {torch.__version__} finds no CUDA device "
                            f"(CUDA build: {torch.version.cuda or 'none'}); this is not a test host")
        torch.cuda.set_device(local_rank)
        device, backend = torch.device("cuda", local_rank), "nccl"
    dist.init_process_group(backend=backend, **({"device_id": device} if device.type == "cuda" else {}))
    autocast = torch.bfloat16 if device.type == "cuda" and torch.cuda.is_bf16_supported() else None
    return Runtime(device=device, backend=backend, rank=dist.get_rank(), world=dist.get_world_size(),
                   local_rank=local_rank, autocast=autocast, test_host=test_host)


class NodeUnfit(Exception):
    def __init__(self, check: str, detail: str):
        super().__init__(detail)
        self.check, self.detail = check, detail


def train(model, rt: Runtime, cfg: ModelConfig, *, steps: int, batch: int, lr: float) -> list[float]:
    """Trains ``steps`` steps; returns the loss of each step averaged over all ranks."""
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.0)
    data = batches(cfg, batch=batch, rank=rt.rank, device=rt.device)
    losses = []
    model.train()
    for _ in range(steps):
        tokens, targets = next(data)
        with torch.autocast(rt.device.type, dtype=rt.autocast or torch.float32,
                            enabled=rt.autocast is not None):
            logits = model(tokens)
        loss = F.cross_entropy(logits.float().view(-1, cfg.vocab), targets.reshape(-1))
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        averaged = loss.detach().clone()
        dist.all_reduce(averaged, op=dist.ReduceOp.SUM)
        losses.append(round(averaged.item() / rt.world, 4))
    return losses


def loss_check(name: str, losses: list[float], *, min_drop: float) -> dict:
    window = max(1, len(losses) // 6)
    first = sum(losses[:window]) / window
    last = sum(losses[-window:]) / window
    drop = 1 - last / first if first > 0 else 0.0
    finite = all(math.isfinite(x) for x in losses)
    return check(name, finite and drop >= min_drop,
                 f"loss {first:.3f} → {last:.3f} ({drop:.0%} lower; at least {min_drop:.0%} needed)",
                 value=round(drop, 4), threshold=min_drop, unit="fraction")


def check(name: str, ok: bool | None, detail: str, **numbers) -> dict:
    status = "skip" if ok is None else ("pass" if ok else "fail")
    return {"name": name, "status": status, "ok": bool(ok) if ok is not None else True,
            "detail": detail, **numbers}


def allreduce_busbw_gbps(rt: Runtime, *, mib: int = 16, iterations: int = 5) -> float:
    """Bus bandwidth of an all-reduce over the job's process group, as nccl-tests defines it
    (algorithm bandwidth × 2(n−1)/n), in GB/s."""
    tensor = torch.ones(mib * 1024 * 1024 // 4, device=rt.device)
    dist.all_reduce(tensor)  # warm-up: connections are set up here
    _sync(rt)
    started = time.perf_counter()
    for _ in range(iterations):
        dist.all_reduce(tensor)
    _sync(rt)
    seconds = (time.perf_counter() - started) / iterations
    algbw = tensor.numel() * 4 / seconds / 1e9
    return round(algbw * 2 * (rt.world - 1) / rt.world, 3) if rt.world > 1 else 0.0


def _sync(rt: Runtime) -> None:
    if rt.device.type == "cuda":
        torch.cuda.synchronize(rt.device)


# --- checkpoint round trip ---------------------------------------------------------------------
def sync_tool(args, directory: Path, *, download: bool) -> dict:
    bucket, prefix = os.environ.get("TRAINYARD_BUCKET", ""), args.prefix
    command = [args.sync_python or sys.executable, args.sync_tool, "--bucket", bucket,
               "--prefix", prefix, str(directory)]
    if download:
        command.insert(2, "--download")
    proc = subprocess.run(command, capture_output=True, text=True, timeout=900)
    lines = proc.stdout.strip().splitlines()
    try:
        summary = json.loads(lines[-1])
    except (IndexError, ValueError):
        summary = {"ok": False, "errors": [(proc.stderr.strip().splitlines() or ["no output"])[-1][:300]]}
    summary["exit_status"] = proc.returncode
    return summary


def local_tensor(value) -> torch.Tensor:
    return value.to_local() if hasattr(value, "to_local") else value


def checkpoint_round_trip(model, make_model, rt: Runtime, args) -> dict:
    """Saves ``model`` (FSDP2) with DCP, uploads it, downloads it elsewhere, loads it into a
    fresh sharded model, and compares every local shard bit for bit."""
    saved_dir = Path(args.workdir) / "checkpoint"
    restored_dir = Path(args.workdir) / "restored"
    if rt.local_rank == 0:
        for d in (saved_dir, restored_dir):
            shutil.rmtree(d, ignore_errors=True)
    dist.barrier()
    started = time.perf_counter()
    dcp.save(get_model_state_dict(model), checkpoint_id=str(saved_dir))
    save_s = time.perf_counter() - started
    result = {"prefix": args.prefix, "save_s": round(save_s, 3)}
    dist.barrier()
    if not os.environ.get("TRAINYARD_BUCKET"):
        # No bucket ordered (no s3.env on the node): the round trip stays on the node's disk.
        return {**result, **compare_after_load(model, make_model, rt, saved_dir),
                "bucket": False}
    # One uploader per node: each node's directory holds the shards its ranks wrote.
    local_ok = torch.tensor([1], device=rt.device)
    summaries = {}
    if rt.local_rank == 0:
        summaries["upload"] = sync_tool(args, saved_dir, download=False)
        local_ok[0] = int(summaries["upload"]["ok"])
    dist.all_reduce(local_ok, op=dist.ReduceOp.MIN)
    if local_ok.item() == 1 and rt.local_rank == 0:
        summaries["download"] = sync_tool(args, restored_dir, download=True)
        local_ok[0] = int(summaries["download"]["ok"])
    dist.all_reduce(local_ok, op=dist.ReduceOp.MIN)
    result.update({k: {f: v.get(f) for f in ("ok", "files", "uploaded", "downloaded", "bytes_uploaded",
                                              "bytes_downloaded", "mib_per_s", "errors")}
                   for k, v in summaries.items()})
    if local_ok.item() != 1:
        errors = [e for s in summaries.values() for e in s.get("errors") or ()]
        why = "; ".join(errors)[:300] or "on another node"
        result.update(ok=False, detail=f"bucket transfer failed: {why}")
        return result
    result.update(compare_after_load(model, make_model, rt, restored_dir), bucket=True)
    return result


def compare_after_load(model, make_model, rt: Runtime, directory: Path) -> dict:
    fresh = make_model(seed=999)  # different initial weights: loading must overwrite them all
    state = get_model_state_dict(fresh)
    started = time.perf_counter()
    dcp.load(state, checkpoint_id=str(directory))
    set_model_state_dict(fresh, state)
    load_s = time.perf_counter() - started
    original, loaded = get_model_state_dict(model), get_model_state_dict(fresh)
    differ = sum(0 if torch.equal(local_tensor(original[k]), local_tensor(loaded[k])) else 1
                 for k in original)
    mismatched = torch.tensor([differ], device=rt.device)
    dist.all_reduce(mismatched)
    where = "through the bucket" if directory.name == "restored" else "on the node's disk (no bucket ordered)"
    return {"ok": mismatched.item() == 0, "tensors": len(original), "mismatched": int(mismatched.item()),
            "load_s": round(load_s, 3),
            "bytes": sum(p.stat().st_size for p in directory.rglob("*") if p.is_file()),
            "detail": f"{len(original)} tensors saved and loaded {where}; "
                      f"{int(mismatched.item())} differ"}


# --- versions ----------------------------------------------------------------------------------
def versions(rt: Runtime) -> dict:
    found = {"python": sys.version.split()[0], "torch": torch.__version__,
             "cuda": torch.version.cuda or "", "backend": rt.backend,
             "strategy": os.environ.get("TRAINYARD_STRATEGY", "")}
    if rt.device.type == "cuda":
        found["nccl"] = ".".join(str(p) for p in torch.cuda.nccl.version())
        found["gpu"] = torch.cuda.get_device_name(rt.device)
    try:
        found["driver"] = subprocess.run(
            ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
            capture_output=True, text=True, timeout=30).stdout.strip().splitlines()[0]
    except (OSError, IndexError, subprocess.SubprocessError):
        found["driver"] = ""
    for name in STACK_PACKAGES[1:]:
        try:
            found[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            pass
    return found


# --- the run -----------------------------------------------------------------------------------
def run(args, rt: Runtime) -> dict:
    cfg = ModelConfig(layers=args.layers)

    def make_model(seed: int = 0, *, fsdp: bool = True):
        torch.manual_seed(seed)
        model = Llama(cfg).to(rt.device)
        if not fsdp:
            return model
        mesh = init_device_mesh(rt.device.type, (rt.world,))
        for block in model.blocks:
            fully_shard(block, mesh=mesh)
        return fully_shard(model, mesh=mesh)

    checks, report = [], {}
    base = make_model(fsdp=False)
    report["model"] = {"parameters": parameter_count(base), "layers": cfg.layers, "dim": cfg.dim,
                       "heads": cfg.heads, "kv_heads": cfg.kv_heads, "vocab": cfg.vocab, "seq": cfg.seq}
    ddp = DistributedDataParallel(base, device_ids=[rt.local_rank] if rt.device.type == "cuda" else None)
    started = time.perf_counter()
    ddp_losses = train(ddp, rt, cfg, steps=args.steps, batch=args.batch, lr=args.lr)
    ddp_s = time.perf_counter() - started
    checks.append(loss_check("DDP loss falls", ddp_losses, min_drop=args.min_loss_drop))
    del ddp, base

    fsdp = make_model()
    started = time.perf_counter()
    fsdp_losses = train(fsdp, rt, cfg, steps=args.steps, batch=args.batch, lr=args.lr)
    fsdp_s = time.perf_counter() - started
    checks.append(loss_check("FSDP2 loss falls", fsdp_losses, min_drop=args.min_loss_drop))
    tokens = args.steps * args.batch * cfg.seq * rt.world
    report["losses"] = {"ddp": ddp_losses, "fsdp2": fsdp_losses}
    report["throughput"] = {"ddp_tokens_per_s": round(tokens / ddp_s, 1),
                            "fsdp2_tokens_per_s": round(tokens / fsdp_s, 1)}

    ckpt = checkpoint_round_trip(fsdp, make_model, rt, args)
    report["checkpoint"] = ckpt
    checks.append(check("sharded checkpoint round trip", ckpt["ok"], ckpt["detail"],
                        value=ckpt.get("bytes"), unit="bytes"))

    busbw = allreduce_busbw_gbps(rt)
    report["bandwidths"] = {"allreduce_busbw_gbps": busbw,
                            "upload_mib_per_s": (ckpt.get("upload") or {}).get("mib_per_s"),
                            "download_mib_per_s": (ckpt.get("download") or {}).get("mib_per_s")}
    if rt.device.type == "cuda":
        peak = torch.tensor([torch.cuda.max_memory_allocated(rt.device)], device=rt.device)
        dist.all_reduce(peak, op=dist.ReduceOp.MAX)
        report["peak_memory_bytes"] = int(peak.item())
    report["checks"] = checks
    return report


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description="Trainyard acceptance train-smoke (run under torchrun)")
    parser.add_argument("--workdir", required=True, help="node-local scratch directory")
    parser.add_argument("--sync-tool", required=True, help="path of provisioning/storage/sync.py on the node")
    parser.add_argument("--sync-python", default="", help="a Python with boto3 (default: this one)")
    parser.add_argument("--prefix", required=True, help="bucket prefix for the checkpoint")
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--batch", type=int, default=8, help="sequences per rank per step")
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--lr", type=float, default=3e-3)
    parser.add_argument("--min-loss-drop", type=float, default=0.3,
                        help="the last sixth of the losses must be this much below the first sixth")
    return parser.parse_args(argv)


def main(argv=None) -> int:
    args = parse_args(argv)
    test_host = os.environ.get("TRAINYARD_TEST_HOST") == "1"
    rank = int(os.environ.get("RANK", "0"))
    report = {"simulated": False, "test_host": test_host,
              "world_size": int(os.environ.get("WORLD_SIZE", "1")),
              "nnodes": int(os.environ.get("NNODES", os.environ.get("GROUP_WORLD_SIZE", "1")))}
    try:
        rt = setup(test_host)
    except NodeUnfit as exc:
        report.update(passed=False, checks=[check(exc.check, False, exc.detail)],
                      versions={"torch": torch.__version__, "cuda": torch.version.cuda or ""})
        if rank == 0:
            print(f"{MARKER} {json.dumps(report)}", flush=True)
        return 1
    report["device"] = rt.device.type
    report["autocast"] = "bf16" if rt.autocast is torch.bfloat16 else "off"
    report["versions"] = versions(rt)
    report.update(run(args, rt))
    report["passed"] = all(c["status"] != "fail" for c in report["checks"])
    dist.barrier()
    dist.destroy_process_group()
    if rt.rank == 0:
        print(f"{MARKER} {json.dumps(report)}", flush=True)
    return 0 if report["passed"] else 1


if __name__ == "__main__":
    sys.exit(main())
