"""The estimator against published measured GPU runs (shared/reference/published_cases.json).

Every measured row of the reference file is configured here as faithfully as the estimator
allows and compared on what the source measured: per-GPU memory (the source's metric: peak
active = allocated, or max reserved) and tokens/s per GPU. A row that needs a setting the
estimator does not have is listed as ``unmodelled: [...]`` with the missing knobs, never
approximated silently. Assumptions a source leaves open are written next to the row.

Run from the repository root:  python bench/estimator_published.py [--json] [--closest] [--cases PATH]
Signed error = (ours - published) / published.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
from dataclasses import dataclass, field, fields
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from portal.sizing.estimator import (  # noqa: E402
    GPUSpec,
    Interconnect,
    ModelSpec,
    ParallelConfig,
    TrainingConfig,
    estimate,
    get_preset,
    model_from_hf_config,
)
from portal.sizing.estimator import memory as mem  # noqa: E402

CASES_NAME = "shared/reference/published_cases.json"
# shared/ sits next to the checkout (/work/shared beside /work/main; above a worktree's parent)
CASES_PATH = next((d / CASES_NAME for d in Path(__file__).resolve().parents if (d / CASES_NAME).exists()),
                  Path(__file__).resolve().parents[2] / CASES_NAME)
GIB = 2**30

# Datasheet dense peaks and bandwidth (shared/reference/gpu_specs.json).
A100_80 = GPUSpec("A100 80GB SXM", 80 * 10**9, 312, None, 19.5, 2039)
H100_SXM = GPUSpec("H100 SXM", 80 * 10**9, 989.4, 1979, 67, 3350)
# torchtitan's H100s: 96 GB HBM2e, 2.4 TB/s, 500 W (the source computes MFU against 989 TF).
H100_96_HBM2E = GPUSpec("H100 96GB HBM2e 500W", 96 * 10**9, 989.4, 1979, 67, 2400)
L40S = GPUSpec("L40S", 48 * 10**9, 362.05, 733, 91.6, 864)

SELENE = Interconnect.nvlink(600, inter_node_gbit=200)  # DGX A100, 8x HDR 200 Gb/s per node
H100_IB = Interconnect.nvlink(900, inter_node_gbit=400)  # 3200 Gb/s per 8-GPU node
A100_ROCE = Interconnect.nvlink(600, inter_node_gbit=200)  # 1600 Gb/s RoCE per node
SINGLE = Interconnect.nvlink(900, inter_node_gbit=0)

LLAMA_32_3B = {  # meta-llama/Llama-3.2-3B config.json (architecture fields)
    "model_type": "llama", "vocab_size": 128256, "hidden_size": 3072, "intermediate_size": 8192,
    "num_hidden_layers": 28, "num_attention_heads": 24, "num_key_value_heads": 8, "head_dim": 128,
    "max_position_embeddings": 131072, "tie_word_embeddings": True,
}


@dataclass
class Row:
    case: str
    label: str
    model: ModelSpec
    training: dict
    parallel: dict
    gpu: GPUSpec
    link: Interconnect
    memory_gib: float | None = None  # published per-GPU memory
    memory_metric: str = "reserved"  # "reserved" (max_memory_reserved) or "active" (peak active)
    tokens_per_gpu: float | None = None  # published tokens/s per GPU
    unmodelled: list[str] = field(default_factory=list)  # settings no knob represents
    assumed: str = ""  # what the source leaves open and we assumed


def unconfigured(case: str, label: str, why: str) -> Row:
    """A published row this bench cannot configure (an unknown model size, technique or
    setting): listed as unmodelled with the reason, never guessed and never a crash."""
    return Row(case, label, None, {}, {}, None, None, unmodelled=[why])


def gpt(name: str, h: int, layers: int, heads: int, vocab: int, seq: int) -> ModelSpec:
    """Megatron / GPT-3 / MPT shape: LayerNorm, GELU MLP of 4h, tied embeddings."""
    return ModelSpec(name=name, family="gpt2", vocab_size=vocab, hidden_size=h, num_layers=layers,
                     num_heads=heads, intermediate_size=4 * h, max_position_embeddings=seq,
                     tie_word_embeddings=True, activation="gelu")


def korthikanti_rows(case: dict) -> list[Row]:
    cfg, rows = case["config"], []
    for name, full_s, present_s, *_ in case["published"]["rows"]:
        if name not in cfg["models"]:
            rows.append(unconfigured(case["id"], name, f"the case's config describes no model {name!r}"))
            continue
        m = cfg["models"][name]
        model = gpt(f"GPT {name}", m["h"], m["L"], m["a"], cfg["vocab"], cfg["seq_len"])
        ga = m["gbs"] // m["mbs"]
        extra = {"pp_interleave": m["interleave_m"]} if "interleave_m" in m else {}
        for label, iter_s, ckpt, sp in (("full recompute", full_s, "full", False),
                                        ("SP + selective", present_s, "selective", True)):
            rows.append(Row(
                case["id"], f"{name} {label}", model,
                {"precision": "bf16-mixed", "mixed_layout": "master", "micro_batch": m["mbs"],
                 "seq_len": cfg["seq_len"], "grad_accum": ga, "checkpointing": ckpt, "attention": "eager",
                 "dropout": 0.1, "stack": "megatron"},
                {"tp": m["t"], "pp": m["p"], "sp": sp, **extra}, A100_80, SELENE,
                tokens_per_gpu=m["gbs"] * cfg["seq_len"] / iter_s / m["gpus"]))
    return rows


def narayanan_rows(case: dict) -> list[Row]:
    cfg, rows = case["config"], []
    s, V = cfg["seq_len"], cfg["vocab"]
    for pb, a, h, L, t, p, n, B, tflops, *_ in case["published"]["rows"]:
        dp = n // (t * p)
        flops_per_token = 96 * L * h * h * (1 + s / (6 * h) + V / (16 * L * h))  # their Eq. 3 / (B s)
        rows.append(Row(
            case["id"], f"{pb}B t{t} p{p} n{n}", gpt(f"GPT {pb}B", h, L, a, V, s),
            {"precision": "bf16-mixed", "mixed_layout": "master", "micro_batch": 1, "seq_len": s,
             "grad_accum": B // dp, "checkpointing": "full", "attention": "eager", "dropout": 0.1,
             "stack": "megatron"},
            {"dp": dp, "tp": t, "pp": p}, A100_80, SELENE,
            tokens_per_gpu=tflops * 1e12 / flops_per_token,
            assumed="micro-batch 1, 1F1B without interleaving (Table 1 gives neither)"))
    return rows


MPT_SHAPES = {  # d_model, n_layers, n_heads (llm-foundry scripts/train/yamls/pretrain/mpt-*.yaml)
    "125m": (768, 12, 12), "350m": (1024, 24, 16), "760m": (1536, 24, 12), "1b": (2048, 24, 16),
    "3b": (2560, 32, 20), "7b": (4096, 32, 32), "13b": (5120, 40, 40), "30b": (7168, 48, 56),
    "70b": (8192, 80, 64)}
FOUNDRY_SHARDING = {"FULL_SHARD": "fsdp-full-shard", "SHARD_GRAD_OP": "fsdp-shard-grad-op",
                    "NO_SHARD": "none"}
FOUNDRY_PRECISION = {"amp_bf16": "bf16-mixed", "amp_fp8": "fp8", "bf16 PURE": "bf16",
                     "amp_fp16": "fp16-mixed"}
A100_40 = GPUSpec("A100 40GB SXM", 40 * 10**9, 312, None, 19.5, 1555)
FOUNDRY_GPUS = {"h100_80gb": (H100_SXM, H100_IB), "a100_80gb": (A100_80, A100_ROCE),
                "a100_40gb": (A100_40, A100_ROCE)}  # both A100 tables: 1600 Gb/s RoCE per node


def foundry_rows(case: dict) -> list[Row]:
    rows = []
    for row in case["published"]["rows"]:
        name, seq, gpus, gpu, _mfu, _hfu, mbs, gbs, tps, prec, shard, ckpt, _n = row
        label = f"{name} s{seq} {gpus}x{gpu.split('_')[0]}{' ckpt' if ckpt else ''} {prec}"
        if shard != "FULL_SHARD":
            label += f" {shard}"
        hardware = FOUNDRY_GPUS.get(gpu.split(" ")[0])
        unknown = [f"{what} {value!r}" for what, value, known in (
            ("model size", name, MPT_SHAPES), ("sharding", shard, FOUNDRY_SHARDING),
            ("precision", prec, FOUNDRY_PRECISION)) if value not in known]
        if hardware is None:
            unknown.append(f"GPU {gpu!r}")
        if unknown:
            rows.append(unconfigured(case["id"], label, "no configuration for " + ", ".join(unknown)))
            continue
        h, L, heads = MPT_SHAPES[name]
        model = gpt(f"MPT-{name}", h, L, heads, 50368, seq)
        dp = gpus
        training = {"precision": FOUNDRY_PRECISION[prec], "micro_batch": mbs, "seq_len": seq,
                    "grad_accum": max(1, gbs // (mbs * dp)), "checkpointing": "full" if ckpt else "none",
                    "attention": "flash", "dropout": 0.0, "stack": "fused",
                    "loss": "fused"}  # MPT's default loss_fn: flash-attn's fused cross-entropy
        unmodelled = []
        if gbs % (mbs * dp):
            unmodelled.append(f"global batch {gbs} is not a multiple of micro-batch x GPUs")
        rows.append(Row(
            case["id"], label, model, training, {"dp": dp, "sharding": FOUNDRY_SHARDING[shard]}, *hardware,
            tokens_per_gpu=tps, unmodelled=unmodelled,
            assumed="MPT (ALiBi) as a GPT shape with learned positions; heads from the yamls"))
    return rows


GPT3_SHAPES = {"GPT3-125M": (768, 12, 12), "GPT3-355M": (1024, 24, 16), "GPT3-760M": (1536, 24, 16),
               "GPT3-1.3B": (2048, 24, 32), "GPT3-2.7B": (2560, 32, 32)}
A100_SINGLE = Interconnect.nvlink(600, inter_node_gbit=0)
# The same GPT-3 shapes trained by other implementations (the README's TFLOP/s table); the
# FlashAttention column is the run of throughput_8xA100_tokens_per_s.
FA_IMPLEMENTATIONS = {
    "Megatron": ({"stack": "megatron", "mixed_layout": "master", "attention": "eager", "dropout": 0.1}, []),
    "HF": ({}, ["Hugging Face GPT-2 modules as of 2022 (gelu_new in Python ops, fp32 softmax upcast,"
                " separate scale and mask kernels): no kernel stack of the time model is theirs"]),
}


def flashattention_rows(case: dict) -> list[Row]:
    rows = []
    s, vocab = 2048, 50257
    for name, text in case["published"]["throughput_8xA100_tokens_per_s"].items():
        if name not in GPT3_SHAPES:
            rows.append(unconfigured(case["id"], f"{name} 8xA100", f"no configuration for model {name!r}"))
            continue
        h, L, heads = GPT3_SHAPES[name]
        figure = re.fullmatch(r"\s*([\d.]+)\s*k\s*", str(text))
        if not figure:
            rows.append(unconfigured(case["id"], f"{name} 8xA100", f"no throughput figure in {text!r}"))
            continue
        tps = float(figure[1]) * 1000 / 8
        rows.append(Row(
            case["id"], f"{name} 8xA100", gpt(name, h, L, heads, vocab, s),
            {"precision": "bf16-mixed", "micro_batch": 8, "seq_len": s, "grad_accum": 8,
             "checkpointing": "none", "attention": "flash", "dropout": 0.0, "stack": "fused",
             "loss": "fused"},
            {"dp": 8}, A100_80, A100_SINGLE, tokens_per_gpu=tps,
            assumed="DDP over 8 GPUs, global batch 512 (the repo's gpt3 configs); the micro-batch does"
                    " not enter our step time; flash-attn's fused cross-entropy"))
    for name, by_impl in case["published"].get("gpt3_seq2048_TFLOPs_per_A100", {}).items():
        for impl, tflops in by_impl.items():
            if impl in ("FA", "FlashAttention") or not isinstance(tflops, int | float):
                continue  # the throughput row above, or no figure ("OOM")
            label = f"{name} {impl} 8xA100"
            if name not in GPT3_SHAPES or impl not in FA_IMPLEMENTATIONS:
                rows.append(unconfigured(case["id"], label, f"no configuration for {name!r} in {impl!r}"))
                continue
            h, L, heads = GPT3_SHAPES[name]
            knobs, unmodelled = FA_IMPLEMENTATIONS[impl]
            # the README's FLOPs: Megatron's Eq. 3 x 3/4 (model FLOPs, no recompute), per token
            flops_per_token = 72 * L * h * h * (1 + s / (6 * h) + vocab / (16 * L * h))
            rows.append(Row(
                case["id"], label, gpt(name, h, L, heads, vocab, s),
                {"precision": "bf16-mixed", "micro_batch": 8, "seq_len": s, "grad_accum": 8,
                 "checkpointing": "none", **knobs},
                {"dp": 8}, A100_80, A100_SINGLE, tokens_per_gpu=tflops * 1e12 / flops_per_token,
                unmodelled=list(unmodelled),
                assumed="DDP over 8 GPUs, global batch 512; Megatron-LM's defaults (attention and hidden"
                        " dropout 0.1, materialised attention scores)"))
    return rows


def torchtitan_rows(case: dict) -> list[Row]:
    model = get_preset("llama-3.1-8b")
    base = {"precision": "bf16-mixed", "mixed_layout": "fsdp2", "micro_batch": 2, "seq_len": 8192,
            "checkpointing": "selective-op", "attention": "flash"}
    variants = {"FSDP": {}, "FSDP + torch.compile": {"compile": True},
                "FSDP + torch.compile + Float8": {"compile": True, "precision": "fp8"}}
    rows = []
    table3 = {"FSDP": (5605, 67.0), "FSDP + torch.compile": (6514, 62.0),
              "FSDP + torch.compile + Float8": (8380, 61.8)}  # the case's notes (128 GPUs)
    for technique, tps, gib in case["published"]["rows"]:
        if technique not in variants:
            rows.append(unconfigured(case["id"], f"8 GPUs {technique}",
                                     f"no configuration for {technique!r}"))
            continue
        training = {**base, **variants[technique]}
        rows.append(Row(case["id"], f"8 GPUs {technique}", model, training,
                        {"dp": 8, "sharding": "fsdp-full-shard"}, H100_96_HBM2E,
                        Interconnect.nvlink(900, inter_node_gbit=400), memory_gib=gib, tokens_per_gpu=tps))
        if technique not in table3:
            continue
        tps128, gib128 = table3[technique]
        rows.append(Row(case["id"], f"128 GPUs {technique}", model, training,
                        {"dp": 128, "sharding": "fsdp-full-shard"}, H100_96_HBM2E,
                        Interconnect.nvlink(900, inter_node_gbit=400), memory_gib=gib128,
                        tokens_per_gpu=tps128))
    return rows


TUNE_LORA_TARGETS = ("q_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")


def torchtune_rows(case: dict) -> list[Row]:
    model = model_from_hf_config(LLAMA_32_3B, name="llama-3.2-3b")
    ladder = [  # what each row adds (torchtune recipe flags -> estimator knobs)
        ("Baseline", {}, ["unpacked variable-length samples (dataset-dependent sequence lengths)"]),
        ("+ Packed Dataset", {}, []),
        ("+ Compile", {"compile": True, "compile_loss": True}, []),
        ("+ Chunked Cross Entropy", {"loss": "chunked"}, []),
        ("+ Activation Checkpointing", {"checkpointing": "full"}, []),
        ("+ Fuse optimizer step into backward", {"optimizer_in_backward": True}, []),
        ("+ Activation Offloading", {"activation_offload": True}, []),
        ("+ 8-bit AdamW", {"optimizer": "adamw-8bit"}, []),
    ]
    training = {"precision": "bf16", "micro_batch": 2, "seq_len": 4096, "attention": "sdpa",
                "checkpointing": "none"}
    published = {r[0]: r for r in case["published"]["rows"]}
    known = {t for t, _, _ in ladder} | {"LoRA", "QLoRA"}
    rows = [unconfigured(case["id"], t, f"no configuration for {t!r}") for t in published if t not in known]
    for technique, adds, unmodelled in ladder:
        training = {**training, **adds}  # each row adds to the one before
        if technique not in published:
            continue
        _, gib, tps = published[technique]
        rows.append(Row(case["id"], technique, model, dict(training), {}, A100_80, SINGLE, memory_gib=gib,
                        memory_metric="active", tokens_per_gpu=tps, unmodelled=list(unmodelled),
                        assumed="A100 80GB; torch.optim.AdamW in bf16 until the 8-bit row"))
    peft = {k: v for k, v in training.items() if k not in ("optimizer_in_backward", "optimizer")}
    for technique, adds in (("LoRA", {"finetune": "lora"}), ("QLoRA", {"finetune": "qlora"})):
        if technique not in published:
            continue
        _, gib, tps = published[technique]
        rows.append(Row(case["id"], technique, model,
                        {**peft, **adds, "lora_rank": 64, "lora_targets": TUNE_LORA_TARGETS},
                        {}, A100_80, SINGLE, memory_gib=gib, memory_metric="active", tokens_per_gpu=tps,
                        assumed="LoRA rank 64 on q,v,output and the MLP (the 3B LoRA recipe); bf16 adapters"))
    return rows


PEFT_LORA = re.compile(r"LoRA r=(?P<rank>\d+) on (?P<targets>[\w,]+)")
PEFT_TARGETS = {"q": "q_proj", "k": "k_proj", "v": "v_proj", "o": "o_proj"}  # short names in the rows


def peft_rows(case: dict) -> list[Row]:
    model = model_from_hf_config(LLAMA_32_3B, name="llama-3.2-3b")
    rows = []
    for method, _trainable, _max, p99, _avg in case["published"]["rows"]:
        training = {"precision": "bf16", "micro_batch": 4, "seq_len": 768, "attention": "sdpa",
                    "checkpointing": "none"}
        unmodelled = []
        lora = PEFT_LORA.fullmatch(method)
        if lora:
            targets = tuple(PEFT_TARGETS.get(t.strip(), t.strip()) for t in lora["targets"].split(","))
            training |= {"finetune": "lora", "lora_rank": int(lora["rank"]), "lora_targets": targets}
        elif method.startswith("IA3"):
            unmodelled.append("IA3 adapters (finetune=ia3)")
        elif not method.startswith("full fine-tuning"):
            rows.append(unconfigured(case["id"], method, f"no configuration for the PEFT method {method!r}"))
            continue
        rows.append(Row(case["id"], method, model, training, {}, L40S, SINGLE, memory_gib=p99 / GIB,
                        memory_metric="reserved",
                        unmodelled=unmodelled,
                        assumed="99th-percentile reserved over training steps; samples at the 768-token cap"))
    return rows


BUILDERS = {
    "korthikanti_table5_e2e": korthikanti_rows,
    "narayanan_table1_weak_scaling": narayanan_rows,
    "llm_foundry_mpt_throughput": foundry_rows,
    "flashattention_readme": flashattention_rows,
    "torchtitan_llama3.1_8B_fsdp_8gpu": torchtitan_rows,
    "torchtune_readme_optimization_ladder": torchtune_rows,
    "peft_metamathqa_llama3.2_3B": peft_rows,
}
NOT_RUNS = {  # measured cases that are not a training step we can configure
    "eleuther_a100_throughput_anchors": "a range of TFLOP/s with no model, batch or layout",
    "mamf_max_achievable_matmul": "a single-matmul benchmark (feeds the matmul efficiency table)",
}


def missing_knobs(cls, kwargs: dict) -> list[str]:
    """Settings the estimator's config class does not accept (unknown field or value)."""
    names = {f.name for f in fields(cls)}
    missing = [f"{k}={v!r}" for k, v in kwargs.items() if k not in names]
    if missing:
        return missing
    try:
        cls(**kwargs)
    except ValueError as exc:
        return [str(exc)]
    return []


def published_memory_view(est, metric: str) -> float:
    """Our figure for the source's memory metric, GiB."""
    g = est.per_gpu
    allocated = g.total - g.framework_overhead
    if metric == "active":
        return allocated / GIB
    return (allocated * (1 + mem.ALLOCATOR_FRAGMENTATION) + mem.CUBLAS_WORKSPACE_BYTES) / GIB


# --closest: what the estimator gives with each unknown knob dropped or replaced by its nearest
# existing value (how the estimator was configured before these knobs existed; for comparison).
CLOSEST_VALUE = {("checkpointing", "selective-op"): "selective", ("precision", "fp8"): "fp8"}


def closest(cls, kwargs: dict) -> dict:
    names = {f.name for f in fields(cls)}
    kept = {k: v for k, v in kwargs.items() if k in names}
    for k in list(kept):
        try:
            cls(**{k: kept[k]})
        except ValueError:
            if (k, kept[k]) in CLOSEST_VALUE:
                kept[k] = CLOSEST_VALUE[k, kept[k]]
            else:
                del kept[k]
        except TypeError:
            pass
    return kept


def evaluate(row: Row, nearest: bool = False) -> dict:
    out = {"case": row.case, "row": row.label, "assumed": row.assumed}
    if nearest:
        row = Row(**{**row.__dict__, "training": closest(TrainingConfig, row.training),
                     "parallel": closest(ParallelConfig, row.parallel)})
    missing = list(row.unmodelled)
    missing += missing_knobs(TrainingConfig, row.training)
    missing += missing_knobs(ParallelConfig, row.parallel)
    if missing:
        out["unmodelled"] = missing
        return out
    training, parallel = TrainingConfig(**row.training), ParallelConfig(**row.parallel)
    try:
        est = estimate(row.model, training, parallel, gpu=row.gpu, interconnect=row.link)
    except ValueError as exc:
        out["unmodelled"] = [str(exc)]
        return out
    if est.unmodelled:  # the estimator's own word: it would only approximate this setup
        out["unmodelled"] = list(est.unmodelled)
        return out
    if row.memory_gib is not None:
        ours = published_memory_view(est, row.memory_metric)
        out["memory"] = (row.memory_gib, ours, (ours - row.memory_gib) / row.memory_gib)
    if row.tokens_per_gpu is not None:
        ours = est.compute.tokens_per_second / parallel.world_size
        out["throughput"] = (row.tokens_per_gpu, ours, (ours - row.tokens_per_gpu) / row.tokens_per_gpu)
    return out


# what a row of an unexpected shape raises while its builder reads it
MALFORMED = (ValueError, TypeError, KeyError, IndexError, ZeroDivisionError)


def rows(path: Path = CASES_PATH) -> list[Row]:
    cases = {c["id"]: c for c in json.loads(path.read_text())["cases"]}
    out = []
    for cid, build in BUILDERS.items():
        if cid in cases:
            out.extend(_build(build, cases[cid]))
    return out


def _build(build, case: dict) -> list[Row]:
    """A case's rows; when one of them is malformed, the others row by row and that one as
    unmodelled with what was wrong with it."""
    try:
        return build(case)
    except MALFORMED as exc:
        published = case.get("published", {})
        if not isinstance(published.get("rows"), list):
            return [unconfigured(case["id"], "(the case)", f"cannot read the case: {exc!r}")]
    out = []
    for i, row in enumerate(published["rows"], 1):
        try:
            out.extend(build({**case, "published": {**published, "rows": [row]}}))
        except MALFORMED as exc:
            out.append(unconfigured(case["id"], f"row {i}", f"cannot read the row {row!r}: {exc!r}"))
    return out


def table(results: list[dict], key: str, unit: str) -> list[str]:
    lines = [f"## {key} ({unit})", "", "| case | row | published | ours | error |",
             "| --- | --- | ---: | ---: | ---: |"]
    errs = []
    for r in results:
        if key in r:
            pub, ours, err = r[key]
            errs.append(abs(err))
            lines.append(f"| {r['case']} | {r['row']} | {pub:,.1f} | {ours:,.1f} | {err:+.1%} |")
    if errs:
        lines += ["", f"{key}: {len(errs)} rows, median |error| {statistics.median(errs):.1%},"
                      f" max |error| {max(errs):.1%}", ""]
    return lines


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--json", action="store_true", help="every row as JSON (with its assumptions)")
    parser.add_argument("--closest", action="store_true",
                        help="drop each unknown knob or use its nearest value"
                             " (the estimator before the regimes)")
    parser.add_argument("--cases", type=Path, default=CASES_PATH,
                        help=f"the cases file (default {CASES_PATH})")
    args = parser.parse_args(argv)
    if not args.cases.exists():
        parser.error(f"{args.cases} does not exist; give --cases PATH to {CASES_NAME}")
    results = [evaluate(r, nearest=args.closest) for r in rows(args.cases)]
    if args.json:
        print(json.dumps(results, indent=1, default=str))
        return
    lines = table(results, "memory", "GiB per GPU") + table(results, "throughput", "tokens/s per GPU")
    lines += ["## unmodelled", ""]
    for r in results:
        if "unmodelled" in r:
            lines.append(f"- {r['case']} / {r['row']}: unmodelled: {r['unmodelled']}")
    for cid, why in NOT_RUNS.items():
        lines.append(f"- {cid}: not a configurable training run ({why})")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
