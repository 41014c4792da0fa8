#!/usr/bin/env python3
"""Acceptance train-smoke: proves a node (or a cluster) trains. Run under torchrun:

    launch.sh train_smoke.py --sync-tool sync.py --workdir DIR --prefix acceptance/run-7

A small Llama-style transformer (RMSNorm, rotary embeddings, SwiGLU) is trained for a few dozen
steps with DDP, then again with FSDP2 (``fully_shard``); the loss must fall both times, and
after DDP every replica must hold the same weights bit for bit (each rank trains on its own
data, so only working gradient averaging keeps them equal). The FSDP2 model is saved as a
sharded ``torch.distributed.checkpoint``, uploaded to the order's bucket with the sync tool,
downloaded into a fresh directory, loaded into a fresh model, and the weights compared; without
a bucket it is loaded from the nodes' own disks.

Rank 0 writes the report (one JSON object) to ``DIR/report.json``; the caller prints it once the
launcher has exited (an unbuffered worker's print is two writes, into which another rank's output
can fall). The ranks agree after each phase, over a gloo group of their own, whether it went
well: a rank that fails (out of memory, a DCP or sync error, no CUDA) tells the others and exits
0 (a non-zero exit makes torchrun kill rank 0 before it writes), and rank 0 reports the failed
phase with each rank's reason. The full traceback goes to stderr (the step log).

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
import re
import shutil
import subprocess
import sys
import time
import traceback
from dataclasses import dataclass, field
from datetime import timedelta
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

REPORT_FILE = "report.json"
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
    learns the rule predicts every next token, so a working trainer drives the loss down fast.
    Each rank draws its own starts: DDP replicas stay equal only if gradients are averaged."""
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
    node: str
    control: object  # a gloo group of every rank: the phases' agreement, metadata broadcast
    phase: str = "starting"


@dataclass
class JobFailed(Exception):
    """A phase failed on at least one rank; every rank raises it, with the same failures."""

    check: str
    failures: list[dict] = field(default_factory=list)

    def detail(self) -> str:
        return failure_detail(self.failures)


def _gloo_interface() -> None:
    """gloo binds the interface its hostname resolves to unless told: on a cluster that may be
    loopback. Use the fabric interface the stack discovered for NCCL (a plain name only)."""
    nccl = os.environ.get("NCCL_SOCKET_IFNAME", "")
    if "GLOO_SOCKET_IFNAME" not in os.environ and re.fullmatch(r"[\w.:-]+(,[\w.:-]+)*", nccl):
        os.environ["GLOO_SOCKET_IFNAME"] = nccl


def setup(test_host: bool, *, timeout_s: float) -> Runtime:
    """Joins the job's process group and checks every rank can train. A rank without CUDA (and
    not a test host) joins over gloo all the same, so the others hear why instead of waiting
    for it in NCCL; it fails "CUDA available" on every rank, before any NCCL collective."""
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    unfit = ""
    if test_host:
        device, backend = torch.device("cpu"), "gloo"
    elif not torch.cuda.is_available():
        unfit = (f"torch {torch.__version__} finds no CUDA device (CUDA build: "
                 f"{torch.version.cuda or 'none'}); this is not a test host")
        device, backend = torch.device("cpu"), "gloo"
    else:
        torch.cuda.set_device(local_rank)
        device, backend = torch.device("cuda", local_rank), "nccl"
    # A timed-out NCCL collective aborts its communicator and raises here (the phase fails with
    # the reason) instead of the watchdog killing the process before rank 0 has reported.
    os.environ.setdefault("TORCH_NCCL_ASYNC_ERROR_HANDLING", "2")
    _gloo_interface()
    dist.init_process_group(backend=backend, timeout=timedelta(seconds=timeout_s))
    # Longer than the job's own collectives: a rank that failed waits here while the others
    # notice (their collective errors or times out) and come to agree.
    control = dist.new_group(backend="gloo", timeout=timedelta(seconds=2 * timeout_s + 60))
    autocast = torch.bfloat16 if device.type == "cuda" and torch.cuda.is_bf16_supported() else None
    rt = Runtime(device=device, backend=backend, rank=dist.get_rank(), world=dist.get_world_size(),
                 local_rank=local_rank, autocast=autocast, test_host=test_host,
                 node=os.environ.get("TRAINYARD_NODE") or os.uname().nodename, control=control)
    everyone = agree(rt, unfit or None, device=device.type)
    if failures := [w for w in everyone if w["error"]]:
        raise JobFailed("CUDA available", failures)
    kinds = {w["device"] for w in everyone}
    if len(kinds) > 1:
        cpu = sorted({w["node"] for w in everyone if w["device"] == "cpu"})
        gpu = sorted({w["node"] for w in everyone if w["device"] == "cuda"})
        raise JobFailed("one kind of node", [{"rank": 0, "node": "", "comm": False, "error": (
            f"the job mixes CPU test hosts ({', '.join(cpu)}) and GPU nodes ({', '.join(gpu)}); "
            "a cluster's nodes must all be one or the other")}])
    return rt


def agree(rt: Runtime, error: str | None, **facts) -> list[dict]:
    """Every rank's word on the phase that just ended (its error or None), through the control
    group: a separate group, so it never pairs with a collective the job left unfinished."""
    mine = {"rank": rt.rank, "node": rt.node, "error": error, "comm": _is_comm(error), **facts}
    everyone: list = [None] * rt.world
    dist.all_gather_object(everyone, mine, group=rt.control)
    return everyone


def phase(rt: Runtime, check_name: str, fn, *args, **kwargs):
    """Runs one phase on this rank, then agrees with the others; JobFailed on every rank when
    it failed on any."""
    rt.phase = check_name
    try:
        result, error = fn(*args, **kwargs), None
    except Exception as exc:  # a failed phase is a failed check, with its reason
        result, error = None, describe(exc)
        print(f"train-smoke rank {rt.rank} ({rt.node}): {check_name} failed:", file=sys.stderr)
        traceback.print_exc(file=sys.stderr)
    failures = [w for w in agree(rt, error) if w["error"]]
    if failures:
        raise JobFailed(check_name, failures)
    return result


COMM_WORDS = ("nccl", "gloo", "connection", "timed out", "timeout", "socket", "peer")


def _is_comm(error: str | None) -> bool:
    return bool(error) and error.startswith("communication between the ranks failed")


def describe(exc: BaseException) -> str:
    """A failure in words a customer can read (the traceback is for the log)."""
    first = (str(exc).strip().splitlines() or [""])[0].strip()[:240]
    if isinstance(exc, torch.OutOfMemoryError):
        return f"out of GPU memory ({first})"
    if isinstance(exc, subprocess.TimeoutExpired):
        return f"{Path(str(exc.cmd[0])).name} did not finish within {exc.timeout:.0f} s"
    if isinstance(exc, getattr(dist, "DistError", ())) or any(w in first.lower() for w in COMM_WORDS):
        return f"communication between the ranks failed: {first or type(exc).__name__}"
    if type(exc).__module__.startswith("torch.distributed.checkpoint"):
        return f"torch.distributed.checkpoint failed: {first or type(exc).__name__}"
    return f"{type(exc).__name__}: {first}" if first else type(exc).__name__


def failure_detail(failures: list[dict], *, limit: int = 600) -> str:
    """Each distinct reason once, with the ranks that gave it; the root causes (not "the others
    stopped answering") first."""
    groups: dict[str, list[dict]] = {}
    for f in sorted(failures, key=lambda f: (f.get("comm", False), f["rank"])):
        groups.setdefault(f["error"], []).append(f)
    parts = []
    for error, who in groups.items():
        ranks = ", ".join(str(f["rank"]) for f in who)
        nodes = ", ".join(sorted({f["node"] for f in who if f["node"]}))
        where = f"rank{'s' if len(who) > 1 else ''} {ranks}{f' on {nodes}' if nodes else ''}"
        parts.append(f"{error} ({where})")
    text = "; ".join(parts)
    return text if len(text) <= limit else text[:limit - 1] + "…"


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
    diverged = next(((i, x) for i, x in enumerate(losses) if not math.isfinite(x)), None)
    if diverged is not None:
        step, value = diverged
        return check(name, False, f"loss diverged ({value}) at step {step + 1} of {len(losses)}",
                     threshold=min_drop, unit="fraction")
    window = max(1, len(losses) // 6)
    first = sum(losses[:window]) / window
    last = sum(losses[-window:]) / window
    drop = 1 - last / first if first > 0 else 0.0
    return check(name, drop >= min_drop,
                 f"loss {first:.3f} → {last:.3f} ({drop:.0%} lower; at least {min_drop:.0%} needed)",
                 value=round(drop, 4), threshold=min_drop, unit="fraction")


def replicas_check(model, rt: Runtime, *, steps: int) -> dict:
    """After DDP every rank must hold rank 0's weights exactly: max |p − p_rank0| over all
    parameters, taken over all ranks, must be 0."""
    name = "DDP replicas identical"
    if rt.world < 2:
        return check(name, None, "one process: no replicas to compare")
    flat = torch.cat([p.detach().float().reshape(-1) for p in model.parameters()])
    reference = flat.clone()
    dist.broadcast(reference, src=0)
    spread = (flat - reference).abs().max()
    spread = torch.nan_to_num(spread, nan=float("inf"))
    dist.all_reduce(spread, op=dist.ReduceOp.MAX)
    value = float(spread.item())
    if value == 0.0:
        return check(name, True, f"all {rt.world} replicas hold the same {flat.numel():,} weights "
                                 f"after {steps} steps on different data", value=0.0, threshold=0.0)
    return check(name, False, f"replicas differ by up to {value:.3g} after {steps} steps: DDP did "
                              "not keep the gradients in sync", value=value, threshold=0.0)


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
    """One run of the sync tool; its summary, or ``ok: false`` with the reason (never raises)."""
    bucket, prefix = os.environ.get("TRAINYARD_BUCKET", ""), args.prefix
    command = [args.sync_python or sys.executable, args.sync_tool, "--bucket", bucket,
               "--prefix", prefix, str(directory)]
    if download:
        command.insert(2, "--download")
    try:
        proc = subprocess.run(command, capture_output=True, text=True, timeout=args.sync_timeout_s)
    except subprocess.TimeoutExpired:
        return {"ok": False, "exit_status": None, "errors": [
            f"the sync tool did not finish the {'download' if download else 'upload'} within "
            f"{args.sync_timeout_s:.0f} s"]}
    except OSError as exc:
        return {"ok": False, "exit_status": None, "errors": [f"the sync tool cannot start: {exc}"]}
    lines = proc.stdout.strip().splitlines()
    try:
        summary = json.loads(lines[-1])
    except (IndexError, ValueError):
        summary = {"ok": False, "errors": [(proc.stderr.strip().splitlines() or ["no output"])[-1][:300]]}
    summary["exit_status"] = proc.returncode
    return summary


def local_tensor(value) -> torch.Tensor:
    return value.to_local() if hasattr(value, "to_local") else value


def save_checkpoint(model, rt: Runtime, saved_dir: Path, restored_dir: Path) -> float:
    if rt.local_rank == 0:
        for d in (saved_dir, restored_dir):
            shutil.rmtree(d, ignore_errors=True)
    dist.barrier(group=rt.control)
    started = time.perf_counter()
    dcp.save(get_model_state_dict(model), checkpoint_id=str(saved_dir))
    return time.perf_counter() - started


def share_metadata(rt: Runtime, directory: Path) -> None:
    """DCP writes ``.metadata`` on the coordinator's (rank 0's) node only, and every rank's load
    reads it: rank 0 sends its bytes and each other node writes them next to its own shards."""
    path = directory / ".metadata"
    payload = [path.read_bytes() if rt.rank == 0 else None]
    dist.broadcast_object_list(payload, src=0, group=rt.control)
    if rt.local_rank == 0 and not path.exists():
        partial = path.with_name(".metadata.partial")
        partial.write_bytes(payload[0])
        partial.replace(path)  # the same bytes if the nodes share a disk: harmless


def checkpoint_round_trip(model, make_model, rt: Runtime, args) -> dict:
    """Saves ``model`` (FSDP2) with DCP, uploads it, downloads it elsewhere, loads it into a
    fresh sharded model, and compares every local shard bit for bit. Without a bucket the
    fresh model loads from the directory the ranks saved to (each node its own)."""
    saved_dir = Path(args.workdir) / "checkpoint"
    restored_dir = Path(args.workdir) / "restored"
    save_s = phase(rt, "sharded checkpoint round trip", save_checkpoint, model, rt, saved_dir,
                   restored_dir)
    result = {"prefix": args.prefix, "save_s": round(save_s, 3)}
    if not os.environ.get("TRAINYARD_BUCKET"):
        # No bucket ordered (no s3.env on the node): the round trip stays on the nodes' disks.
        phase(rt, "sharded checkpoint round trip", share_metadata, rt, saved_dir)
        loaded = phase(rt, "sharded checkpoint round trip", compare_after_load, model, make_model,
                       rt, saved_dir)
        return {**result, **loaded, "bucket": False}
    # One transfer per node: each node's directory holds the shards its ranks wrote.
    summaries = {}
    if rt.local_rank == 0:
        summaries["upload"] = sync_tool(args, saved_dir, download=False)
    if all_ok(rt, summaries) and rt.local_rank == 0:
        summaries["download"] = sync_tool(args, restored_dir, download=True)
    ok = all_ok(rt, summaries)
    result.update({k: {f: v.get(f) for f in ("ok", "files", "uploaded", "downloaded", "bytes_uploaded",
                                              "bytes_downloaded", "mib_per_s", "errors")}
                   for k, v in summaries.items()})
    if not ok:
        errors = [e for s in summaries.values() for e in s.get("errors") or ()]
        why = "; ".join(errors)[:300] or "on another node"
        result.update(ok=False, detail=f"bucket transfer failed: {why}")
        return result
    loaded = phase(rt, "sharded checkpoint round trip", compare_after_load, model, make_model, rt,
                   restored_dir)
    result.update(loaded, bucket=True)
    return result


def all_ok(rt: Runtime, summaries: dict) -> bool:
    """Whether every node's transfers so far went well (the control group's word on it)."""
    mine = all(s.get("ok") for s in summaries.values())
    everyone: list = [None] * rt.world
    dist.all_gather_object(everyone, mine, group=rt.control)
    return all(everyone)


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
    where = ("through the bucket" if directory.name == "restored"
             else "from the nodes' own disks (no bucket ordered)")
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
def run(args, rt: Runtime, report: dict) -> None:
    """The phases, each agreed by all ranks; fills ``report`` as it goes (kept on a failure)."""
    cfg = ModelConfig(layers=args.layers)
    checks = report.setdefault("checks", [])

    def make_model(seed: int = 0, *, fsdp: bool = True):
        torch.manual_seed(seed)
        model = Llama(cfg).to(rt.device)
        if not fsdp:
            return model
        mesh = init_device_mesh(rt.device.type, (rt.world,))
        for block in model.blocks:
            fully_shard(block, mesh=mesh)
        return fully_shard(model, mesh=mesh)

    def ddp_phase():
        base = make_model(fsdp=False)
        report["model"] = {"parameters": parameter_count(base), "layers": cfg.layers, "dim": cfg.dim,
                           "heads": cfg.heads, "kv_heads": cfg.kv_heads, "vocab": cfg.vocab,
                           "seq": cfg.seq}
        ddp = DistributedDataParallel(base, device_ids=[rt.local_rank] if rt.device.type == "cuda" else None)
        started = time.perf_counter()
        losses = train(ddp, rt, cfg, steps=args.steps, batch=args.batch, lr=args.lr)
        seconds = time.perf_counter() - started
        return losses, seconds, replicas_check(ddp.module, rt, steps=args.steps)

    ddp_losses, ddp_s, replicas = phase(rt, "DDP training", ddp_phase)
    report.setdefault("losses", {})["ddp"] = ddp_losses
    checks += [loss_check("DDP loss falls", ddp_losses, min_drop=args.min_loss_drop), replicas]

    def fsdp_phase():
        model = make_model()
        started = time.perf_counter()
        losses = train(model, rt, cfg, steps=args.steps, batch=args.batch, lr=args.lr)
        return model, losses, time.perf_counter() - started

    fsdp, fsdp_losses, fsdp_s = phase(rt, "FSDP2 training", fsdp_phase)
    report["losses"]["fsdp2"] = fsdp_losses
    checks.append(loss_check("FSDP2 loss falls", fsdp_losses, min_drop=args.min_loss_drop))
    tokens = args.steps * args.batch * cfg.seq * rt.world
    report["throughput"] = {"ddp_tokens_per_s": round(tokens / ddp_s, 1),
                            "fsdp2_tokens_per_s": round(tokens / fsdp_s, 1)}

    ckpt = checkpoint_round_trip(fsdp, make_model, rt, args)
    report["checkpoint"] = ckpt
    checks.append(check("sharded checkpoint round trip", ckpt["ok"], ckpt["detail"],
                        value=ckpt.get("bytes"), unit="bytes"))

    busbw = phase(rt, "all-reduce bandwidth", allreduce_busbw_gbps, rt)
    report["bandwidths"] = {"allreduce_busbw_gbps": busbw,
                            "upload_mib_per_s": (ckpt.get("upload") or {}).get("mib_per_s"),
                            "download_mib_per_s": (ckpt.get("download") or {}).get("mib_per_s")}
    if rt.device.type == "cuda":
        peak = torch.tensor([torch.cuda.max_memory_allocated(rt.device)], device=rt.device)
        dist.all_reduce(peak, op=dist.ReduceOp.MAX)
        report["peak_memory_bytes"] = int(peak.item())


def finite(value):
    """``value`` with every non-finite float as None: JSON (and PostgreSQL) have no NaN."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: finite(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [finite(v) for v in value]
    return value


def write_report(workdir: str, report: dict) -> None:
    """The report as one JSON object in ``workdir/report.json``, whole or not at all."""
    path = Path(workdir) / REPORT_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(REPORT_FILE + ".partial")
    partial.write_text(json.dumps(finite(report), allow_nan=False), encoding="utf-8")
    partial.replace(path)


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description="Trainyard acceptance train-smoke (run under torchrun)")
    parser.add_argument("--workdir", required=True, help="node-local scratch directory")
    parser.add_argument("--sync-tool", required=True, help="path of provisioning/storage/sync.py on the node")
    parser.add_argument("--sync-python", default="", help="a Python with boto3 (default: this one)")
    parser.add_argument("--sync-timeout-s", type=float, default=900.0)
    parser.add_argument("--prefix", required=True, help="bucket prefix for the checkpoint")
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--batch", type=int, default=8, help="sequences per rank per step")
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--lr", type=float, default=3e-3)
    parser.add_argument("--min-loss-drop", type=float, default=0.3,
                        help="the last sixth of the losses must be this much below the first sixth")
    parser.add_argument("--collective-timeout-s", type=float, default=300.0,
                        help="how long a collective waits for a rank that stopped answering")
    return parser.parse_args(argv)


def main(argv=None) -> int:
    args = parse_args(argv)
    test_host = os.environ.get("TRAINYARD_TEST_HOST") == "1"
    rank = int(os.environ.get("RANK", "0"))
    if rank == 0:
        (Path(args.workdir) / REPORT_FILE).unlink(missing_ok=True)
    report = {"simulated": False, "test_host": test_host,
              "world_size": int(os.environ.get("WORLD_SIZE", "1")),
              "nnodes": int(os.environ.get("NNODES", os.environ.get("GROUP_WORLD_SIZE", "1"))),
              "versions": {"torch": torch.__version__, "cuda": torch.version.cuda or ""},
              "checks": []}
    rt = None
    try:
        rt = setup(test_host, timeout_s=args.collective_timeout_s)
        report["device"] = rt.device.type
        report["autocast"] = "bf16" if rt.autocast is torch.bfloat16 else "off"
        report["versions"] = versions(rt)
        run(args, rt, report)
        dist.barrier(group=rt.control)
    except JobFailed as exc:
        report["checks"].append(check(exc.check, False, exc.detail()))
    except Exception as exc:  # the ranks lost touch (one died, the control group broke)
        traceback.print_exc(file=sys.stderr)
        where = rt.phase if rt is not None else "joining the process group"
        report["checks"].append(check(rt.phase if rt is not None else "process group", False,
                                      f"the ranks lost touch during {where}: {describe(exc)}"))
    report["passed"] = bool(report["checks"]) and all(c["status"] != "fail" for c in report["checks"])
    if rank == 0:
        write_report(args.workdir, report)
    if dist.is_initialized():
        try:
            dist.destroy_process_group()
        except Exception:  # noqa: BLE001 - the report is written; nothing is left to say
            pass
    # Only rank 0's status tells: another rank's non-zero exit would make torchrun stop rank 0.
    return 0 if rank != 0 or report["passed"] else 1


if __name__ == "__main__":
    sys.exit(main())
