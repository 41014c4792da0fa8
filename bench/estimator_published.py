"""The estimator against published measured GPU runs (shared/reference/published_cases.json and
bench/published_cases_extra.json).

Every measured row of the cases files is configured here as faithfully as the estimator
allows and compared on what the source measured: per-GPU memory (the source's metric: peak
active = allocated, max reserved, or the device's memory in use) and tokens/s per GPU. A row
that needs a setting the estimator does not have is listed as ``unmodelled: [...]`` with the
missing knobs, never approximated silently. Assumptions a source leaves open are written next
to the row.

Two splits, printed side by side: ``calibration`` (the reference file's rows and the extra
cases used while modelling) and ``held-out`` (extra cases kept aside to check the model; each
case of the extra file says which it is).

Run from the repository root:
    python bench/estimator_published.py [--json] [--closest] [--cases PATH] [--extra PATH | --no-extra]
Signed error = (ours - published) / published.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
from dataclasses import dataclass, field, fields, replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from portal.sizing.estimator import (  # noqa: E402
    GPUSpec,
    Interconnect,
    ModelSpec,
    ParallelConfig,
    TrainingConfig,
    ZeroConfig,
    estimate,
    get_preset,
    model_from_hf_config,
)
from portal.sizing.estimator import memory as mem  # noqa: E402

CASES_NAME = "shared/reference/published_cases.json"
# shared/ sits next to the checkout (/work/shared beside /work/main; above a worktree's parent)
CASES_PATH = next((d / CASES_NAME for d in Path(__file__).resolve().parents if (d / CASES_NAME).exists()),
                  Path(__file__).resolve().parents[2] / CASES_NAME)
EXTRA_PATH = Path(__file__).resolve().parent / "published_cases_extra.json"
GIB = 2**30
SPLITS = ("calibration", "held-out")

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
    split: str = "calibration"  # "calibration" or "held-out" (the case's split)
    extra: bool = False  # from the extra cases file (else the reference file / --cases)


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
    # torchtune's QLoRA builders quantise the base with torchao's NF4Tensor (FrozenNF4Linear)
    for technique, adds in (("LoRA", {"finetune": "lora"}),
                            ("QLoRA", {"finetune": "qlora", "quant_storage": "torchao-nf4"})):
        if technique not in published:
            continue
        _, gib, tps = published[technique]
        rows.append(Row(case["id"], technique, model,
                        {**peft, **adds, "lora_rank": 64, "lora_targets": TUNE_LORA_TARGETS},
                        {}, A100_80, SINGLE, memory_gib=gib, memory_metric="active", tokens_per_gpu=tps,
                        assumed="LoRA rank 64 on q,v,output and the MLP (the 3B LoRA recipe); bf16 adapters"))
    return rows


PEFT_LORA = re.compile(r"LoRA r=(?P<rank>\d+) on (?P<targets>[\w,]+)(?: \((?P<variant>[\w-]+)\))?")
# LoRA variants of PEFT's results: rsLoRA only rescales (alpha / sqrt(r)): the same tensors
PEFT_VARIANTS = {  # a variant's knobs, or why it is not modelled
    None: {}, "rsLoRA": {}, "DoRA": {"use_dora": True},
    "LoRA-FA": "the LoRA-FA optimizer (frozen A, projected gradients) is no optimizer of the estimator",
}
PEFT_TARGETS = {"q": "q_proj", "k": "k_proj", "v": "v_proj", "o": "o_proj"}  # short names in the rows


def peft_lora(lora: re.Match) -> tuple[dict, list[str]]:
    """The knobs of a LoRA method of PEFT's results (a PEFT_LORA match of a known variant) and
    what of it is not modelled."""
    targets = tuple(PEFT_TARGETS.get(t.strip(), t.strip()) for t in lora["targets"].split(","))
    knobs = {"finetune": "lora", "lora_rank": int(lora["rank"]), "lora_targets": targets}
    variant = PEFT_VARIANTS[lora["variant"]]
    return (knobs, [variant]) if isinstance(variant, str) else ({**knobs, **variant}, [])


def peft_rows(case: dict) -> list[Row]:
    model = model_from_hf_config(LLAMA_32_3B, name="llama-3.2-3b")
    rows = []
    for method, _trainable, _max, p99, _avg in case["published"]["rows"]:
        training = {"precision": "bf16", "micro_batch": 4, "seq_len": 768, "attention": "sdpa",
                    "checkpointing": "none"}
        unmodelled = []
        lora = PEFT_LORA.fullmatch(method)
        if lora:
            if lora["variant"] not in PEFT_VARIANTS:
                why = f"no configuration for the LoRA variant {lora['variant']!r}"
                rows.append(unconfigured(case["id"], method, why))
                continue
            knobs, unmodelled = peft_lora(lora)
            training |= knobs
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


def peft_time_rows(case: dict) -> list[Row]:
    """LoRA and DoRA on the same data: tokens/s of the training steps, samples at their mean
    length (a batch pads to its longest sample, so more tokens run than the run counts). The
    runs' adapters were fp32 over the bf16 model (PEFT's autocast_adapter_dtype), which the
    estimator's pure-bf16 layout does not say: it counts half adapters."""
    model = model_from_hf_config(LLAMA_32_3B, name="llama-3.2-3b")
    rows = []
    for method, tokens, samples, seconds in case["published"]["rows"]:
        lora = PEFT_LORA.fullmatch(method)
        if lora is None or lora["variant"] not in PEFT_VARIANTS:
            rows.append(unconfigured(case["id"], method, f"no configuration for {method!r}"))
            continue
        knobs, unmodelled = peft_lora(lora)
        training = {"precision": "bf16", "micro_batch": 4, "seq_len": round(tokens / samples),
                    "attention": "sdpa", "checkpointing": "none", **knobs}
        rows.append(Row(case["id"], method, model, training, {}, L40S, SINGLE, unmodelled=unmodelled,
                        tokens_per_gpu=tokens / seconds, split=case.get("split", "held-out"),
                        assumed="samples at their mean length, batches of 4 without padding; half adapters"))
    return rows


# --- Extra cases (bench/published_cases_extra.json) ---------------------------------------------

H200_SXM = GPUSpec("H200 SXM", 141 * 10**9, 989.4, 1979, 67, 4800)
RTX_4090 = GPUSpec("GeForce RTX 4090", 24 * 10**9, 165.2, None, 82.6, 1008)  # bf16 with fp32 accumulate
RTX_A6000 = GPUSpec("RTX A6000", 48 * 10**9, 154.8, None, 38.7, 768)  # datasheet: 309.7 TF sparse
DGX_H100 = Interconnect.nvlink(900, inter_node_gbit=400)  # 8 x 400 Gb/s InfiniBand per node
A100_NODE = Interconnect.nvlink(600, inter_node_gbit=0)
TITAN_MODELS = {"8B": "llama-3.1-8b", "70B": "llama-3.1-70b", "405B": "llama-3.1-405b"}


def titan_multid_rows(case: dict) -> list[Row]:
    """torchtitan's December 2024 Tables 2, 4, 5, 6: float8 (tensorwise, FSDP float8 all-gather as
    llama3_405b.toml enables it), compile (blocks only: the loss compile was commented out at
    9dec370), full AC, SP with TP, no resharding under PP, pipeline micro-batches = PP degree."""
    rows = []
    for table, size, fsdp, tp, pp, cp, seq, lbs, schedule, async_tp, tps, gib in case["published"]["rows"]:
        label = (f"T{table} {size} fsdp{fsdp} tp{tp} pp{pp} cp{cp} s{seq}"
                 + (f" {schedule}" if schedule else "") + (" asyncTP" if async_tp else ""))
        if size not in TITAN_MODELS or schedule not in (None, "1F1B", "Interleaved1F1B"):
            rows.append(unconfigured(case["id"], label, f"no configuration for {size!r} / {schedule!r}"))
            continue
        microbatches = pp if pp > 1 else 1
        training = {"precision": "fp8", "mixed_layout": "fsdp2", "micro_batch": lbs // microbatches,
                    "grad_accum": microbatches, "seq_len": seq, "checkpointing": "full", "attention": "flash",
                    "compile": True, "float8_all_gather": True}
        parallel = {"dp": fsdp, "tp": tp, "pp": pp, "cp": cp, "sp": tp > 1, "async_tp": async_tp,
                    "sharding": "fsdp-full-shard"}
        if pp > 1:
            parallel |= {"pp_microbatches": microbatches, "reshard_after_forward": False}
            if schedule == "Interleaved1F1B":
                parallel["pp_interleave"] = 2
        rows.append(Row(case["id"], label, get_preset(TITAN_MODELS[size]), training, parallel, H100_96_HBM2E,
                        H100_IB, memory_gib=gib, tokens_per_gpu=tps, split=case.get("split", "held-out"),
                        assumed="FSDP float8 all-gather on (llama3_405b.toml); the 8B/70B tables as the"
                                " 405B one"))
    return rows


ASYNC_QUANT = {"bf16": {"precision": "bf16-mixed"},
               "float8 tensorwise": {"precision": "fp8", "float8_all_gather": True},
               "float8 rowwise": {"precision": "fp8", "float8_recipe": "rowwise"}}


def titan_asynctp_rows(case: dict) -> list[Row]:
    """torchtitan's June 2025 async-TP page: FSDP x TP 8, compile (model and loss, as torchtitan
    compiled both by then), SP with TP; each quantization with vanilla and async TP."""
    rows = []
    for size, fsdp, tp, lbs, ac, quant, vanilla, async_tps in case["published"]["rows"]:
        for is_async, tps in ((False, vanilla), (True, async_tps)):
            label = f"{size} fsdp{fsdp} tp{tp} {quant} {'async' if is_async else 'vanilla'} TP"
            if size not in TITAN_MODELS or quant not in ASYNC_QUANT or ac not in ("full", "op"):
                why = f"no configuration for {size!r} {quant!r} {ac!r}"
                rows.append(unconfigured(case["id"], label, why))
                continue
            training = {"mixed_layout": "fsdp2", "micro_batch": lbs, "seq_len": 8192, "attention": "flash",
                        "checkpointing": "full" if ac == "full" else "selective-op", "compile": True,
                        "compile_loss": True, **ASYNC_QUANT[quant]}
            rows.append(Row(case["id"], label, get_preset(TITAN_MODELS[size]), training,
                            {"dp": fsdp, "tp": tp, "sp": True, "async_tp": is_async,
                             "sharding": "fsdp-full-shard"},
                            H100_96_HBM2E, H100_IB, tokens_per_gpu=tps, split=case.get("split", "held-out"),
                            assumed="float8 tensorwise with the FSDP float8 all-gather (docs/float8.md)"))
    return rows


def titan_h200_rows(case: dict) -> list[Row]:
    rows = []
    for nodes, tps, gib in case["published"]["rows"]:
        training = {"precision": "fp8", "mixed_layout": "fsdp2", "micro_batch": 2, "seq_len": 8192,
                    "checkpointing": "selective-op", "attention": "flash", "compile": True,
                    "compile_loss": True, "float8_all_gather": True}
        rows.append(Row(case["id"], f"{8 * nodes} H200 FSDP float8", get_preset("llama-3.1-8b"), training,
                        {"dp": 8 * nodes, "sharding": "fsdp-full-shard"}, H200_SXM, H100_IB, memory_gib=gib,
                        tokens_per_gpu=tps, split=case.get("split", "held-out"),
                        assumed="memory as torchtitan logs it (max reserved)"))
    return rows


TUNE_MODELS = {"Llama 3.1 8B": "llama-3.1-8b", "Llama 3.1 70B": "llama-3.1-70b",
               "Llama 3.1 405B": "llama-3.1-405b"}
TUNE_GPUS = {"RTX 4090": RTX_4090, "RTX A6000": RTX_A6000, "A100": A100_80}
QV, QKV = ("q_proj", "v_proj"), ("q_proj", "k_proj", "v_proj")
QKVO_MLP = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")
TUNE_RECIPES = {  # (model, method): knobs of its recipe config at 30b8519e8
    ("Llama 3.1 8B", "Full finetune"): {"optimizer": "adamw-8bit-paged", "optimizer_in_backward": True},
    ("Llama 3.1 8B", "LoRA"): {"finetune": "lora", "lora_rank": 8, "lora_targets": QV},
    ("Llama 3.1 8B", "QLoRA"): {"finetune": "qlora", "lora_rank": 8, "lora_targets": QKVO_MLP,
                                "quant_storage": "torchao-nf4"},
    ("Llama 3.1 70B", "Full finetune"): {"optimizer_impl": "fused"},
    ("Llama 3.1 70B", "LoRA"): {"finetune": "lora", "lora_rank": 16, "lora_targets": QKV},
    ("Llama 3.1 405B", "QLoRA"): {"finetune": "qlora", "lora_rank": 16, "lora_targets": QKVO_MLP,
                                  "quant_storage": "torchao-nf4"},
}


# Rows of that table that did not run as the README states, by what they show themselves: the same
# LoRA recipe reads 16.2 GiB on the 4090 and 30.3 GiB on the A6000, and 4,699 tokens/s of an 8B
# LoRA (6 x 8.03e9 FLOPs per token with its checkpointing) is 226 TFLOP/s on a 154.8 TFLOP/s GPU.
# The 4090 LoRA row's 3,083 tokens/s is 149 TFLOP/s, 90 % of the 4090's dense 165.2: more than a
# matmul sustains on it; its memory is compared, its tokens/s not.
TUNE_NOT_AS_STATED = {"RTX A6000": "the README's A6000 rows did not run as stated: the same LoRA recipe reads"
                                   " 16.2 GiB on the 4090 and 30.3 GiB on the A6000, and its 4,699 tokens/s"
                                   " need 226 TFLOP/s on a 154.8 TFLOP/s GPU"}
TUNE_MEMORY_ONLY = {("Llama 3.1 8B", "LoRA", "RTX 4090")}


def torchtune_llama31_rows(case: dict) -> list[Row]:
    """torchtune's README table: batch 2, packed 2048, compile (model and loss), bf16 weights and
    optimizer states, AC on, chunked cross-entropy; the 8-GPU recipes on FSDP2 (the 70B full
    finetune with CPU offload and torch's fused AdamW)."""
    rows = []
    for model, method, gpus, gpu, peak, unit, tps in case["published"]["rows"]:
        label = f"{model} {method} {gpus}x {gpu}"
        knobs = TUNE_RECIPES.get((model, method))
        if knobs is None or gpu not in TUNE_GPUS or unit not in ("GiB", "GB"):
            why = f"no configuration for {model!r} {method!r} on {gpu!r}"
            rows.append(unconfigured(case["id"], label, why))
            continue
        if gpu in TUNE_NOT_AS_STATED:
            rows.append(unconfigured(case["id"], label, TUNE_NOT_AS_STATED[gpu]))
            continue
        training = {"precision": "bf16", "micro_batch": 2, "seq_len": 2048, "checkpointing": "full",
                    "attention": "sdpa", "compile": True, "compile_loss": True, "loss": "chunked", **knobs}
        parallel = {}
        if gpus > 1:
            parallel = {"dp": gpus, "sharding": "fsdp-full-shard"}
            if (model, method) == ("Llama 3.1 70B", "Full finetune"):
                parallel["offload"] = "optimizer+params"
        rows.append(Row(case["id"], label, get_preset(TUNE_MODELS[model]), training, parallel, TUNE_GPUS[gpu],
                        A100_NODE if gpus > 1 else SINGLE, memory_gib=peak, memory_metric="active",
                        tokens_per_gpu=None if (model, method, gpu) in TUNE_MEMORY_ONLY else tps / gpus,
                        split=case.get("split", "held-out"),
                        assumed="peak active memory in GiB as torchtune logs it ('GB' read as GiB);"
                                " tokens/s of the whole run (the 4090 LoRA row: memory only); A100 80GB"))
    return rows


NEMO_GPT3 = {"GPT3-5B": (4096, 24, 32), "GPT3-20B": (6144, 44, 48), "GPT3-175B": (12288, 96, 96)}
NEMO_LLAMA = {"LLAMA2-7B": "llama-2-7b", "LLAMA2-13B": "llama-2-13b", "LLAMA2-70B": "llama-2-70b",
              "LLAMA3-8B": "llama-3.1-8b", "LLAMA3-70B": "llama-3.1-70b"}


def nemo_model(name: str, seq: int) -> ModelSpec | None:
    if name in NEMO_LLAMA:
        return get_preset(NEMO_LLAMA[name])
    if name in NEMO_GPT3:
        h, layers, heads = NEMO_GPT3[name]
        return gpt(name, h, layers, heads, 50304, seq)
    return None


def nemo_training(seq: int, mbs: int, ga: int) -> dict:
    """Megatron-Core with Transformer Engine in FP8: bf16 weights + fp32 main weights in the
    distributed optimizer, TE's fused attention, no activation checkpointing."""
    return {"precision": "fp8", "mixed_layout": "master", "micro_batch": mbs, "seq_len": seq,
            "grad_accum": ga, "checkpointing": "none", "attention": "flash", "dropout": 0.0,
            "stack": "megatron-core"}


NEMO_DISTRIBUTED_OPTIMIZER = ZeroConfig(overlap_comm=True)  # overlap_grad_reduce / overlap_param_gather


def nemo_parallel(gpus: int, tp: int, pp: int, cp: int, vp: int, ga: int) -> dict:
    """Megatron-Core's distributed optimizer (optimizer states sharded over DP: ZeRO-1) with its
    gradient reduce-scatter and parameter all-gather overlapped, SP with TP, and TP
    communication overlapped with the GEMMs (Transformer Engine userbuffers: async TP)."""
    out = {"dp": gpus // (tp * pp * cp), "tp": tp, "pp": pp, "cp": cp, "sp": tp > 1, "async_tp": tp > 1,
           "sharding": "zero1", "zero": NEMO_DISTRIBUTED_OPTIMIZER}
    if pp > 1:
        out["pp_microbatches"] = ga
        if vp > 1:
            out["pp_interleave"] = vp
    return out


def nemo_pretrain_rows(case: dict) -> list[Row]:
    rows = []
    for name, gpus, gbs, mbs, seq, tp, pp, cp, vp, tps, _tflops in case["published"]["rows"]:
        label = f"{name} {gpus} GPUs tp{tp} pp{pp} cp{cp} vp{vp}"
        model = nemo_model(name, seq)
        if model is None:
            rows.append(unconfigured(case["id"], label, f"no configuration for {name!r} (Nemotron-4's"
                                     " squared-ReLU MLP and 256k vocabulary are no model family of the"
                                     " estimator)"))
            continue
        dp = gpus // (tp * pp * cp)
        ga = gbs // (mbs * dp)
        rows.append(Row(case["id"], label, model, nemo_training(seq, mbs, ga),
                        nemo_parallel(gpus, tp, pp, cp, vp, ga), H100_SXM, DGX_H100, tokens_per_gpu=tps,
                        split=case.get("split", "held-out"),
                        assumed="NeMo's GPT-3 shapes (4h MLP, 50,304 vocabulary); distributed optimizer ="
                                " ZeRO-1 with overlapped reduce and gather; SP and TP overlap with TP; no"
                                " activation checkpointing; TE fused attention"))
    return rows


def nemo_finetune_rows(case: dict) -> list[Row]:
    rows = []
    for name, task, gpus, gbs, mbs, seq, tp, pp, tps, _tflops in case["published"]["rows"]:
        label = f"{name} {task} {gpus} GPUs tp{tp} pp{pp}"
        model = nemo_model(name, seq)
        if model is None or task not in ("SFT", "LoRA"):
            rows.append(unconfigured(case["id"], label, f"no configuration for {name!r} {task!r}"))
            continue
        dp = gpus // (tp * pp)
        ga = gbs // (mbs * dp)
        training = nemo_training(seq, mbs, ga)
        if task == "LoRA":
            training |= {"finetune": "lora", "lora_rank": 32, "lora_targets": QKV}
        rows.append(Row(case["id"], label, model, training, nemo_parallel(gpus, tp, pp, 1, 1, ga), H100_SXM,
                        DGX_H100, tokens_per_gpu=tps, split=case.get("split", "held-out"),
                        assumed="LoRA as NeMo 1.x defaults it (rank 32 on the fused qkv); sequences packed to"
                                " 4096 tokens; otherwise as the pre-training rows"))
    return rows


FMS_MODELS = {"7b": "llama-2-7b", "13b": "llama-2-13b", "70b": "llama-2-70b"}
CODELLAMA_34B = ModelSpec(name="llama-34b (CodeLlama-34B shape)", family="llama", vocab_size=32000,
                          hidden_size=8192, num_layers=48, num_heads=64, num_kv_heads=8,
                          intermediate_size=22016, max_position_embeddings=16384)
FMS_CLUSTERS = (("A100 128 GPUs", 128, A100_80, Interconnect.nvlink(600, inter_node_gbit=400 / 8)),
                ("H100 96 GPUs", 96, H100_SXM, Interconnect.nvlink(900, inter_node_gbit=800 / 8)))


def fms_fsdp_rows(case: dict) -> list[Row]:
    """IBM's fms-fsdp (FSDP1, bf16 MixedPrecision incl. reductions, SDPA, compile), seq 4096."""
    rows = []
    for size, sharding, compiled, ac, batch, a100_tps, h100_tps in case["published"]["rows"]:
        for (cluster, gpus, gpu, link), tps in zip(FMS_CLUSTERS, (a100_tps, h100_tps), strict=True):
            label = f"{size} {sharding} {cluster}"
            model = CODELLAMA_34B if size == "34b" else (get_preset(FMS_MODELS[size]) if size in FMS_MODELS
                                                         else None)
            if model is None or sharding not in ("FSDP", "HSDP") or ac not in ("none", "selective"):
                why = f"no configuration for {size!r} {sharding!r} {ac!r}"
                rows.append(unconfigured(case["id"], label, why))
                continue
            # SDPA's flash backend, as the README says (the torch of 2024 preferred it to cuDNN's)
            training = {"precision": "bf16-mixed", "mixed_layout": "autocast", "micro_batch": batch,
                        "seq_len": 4096, "attention": "sdpa", "attention_kernel": "fa2",
                        "compile": bool(compiled), "checkpointing": "none"}
            if ac == "selective":  # fms-fsdp's share of blocks checkpointed, from the README's HFU/MFU
                training |= {"checkpointing": "full"} | ({"checkpoint_every": 2} if size == "13b" else {})
            parallel = {"dp": gpus, "sharding": "fsdp-hybrid" if sharding == "HSDP" else "fsdp-full-shard",
                        "fsdp_reduce_dtype": "bf16"}
            rows.append(Row(case["id"], label, model, training, parallel, gpu, link, tokens_per_gpu=tps,
                            split=case.get("split", "held-out"),
                            assumed="network per node of 8 GPUs; selective AC = every block for 34B/70B"
                                    " (HFU/MFU 1.35), every other block for 13B; the 34B is CodeLlama-34B's"
                                    " shape"))
    return rows


PEFT_70B = {  # method: (training knobs, parallel knobs)
    "FSDP QLoRA": ({"precision": "bf16", "finetune": "qlora", "micro_batch": 2, "grad_accum": 2,
                    "quant_storage": "bf16"}, {"dp": 2, "sharding": "fsdp-full-shard"}),
    "FSDP QLoRA + offload": ({"precision": "bf16", "finetune": "qlora", "micro_batch": 2, "grad_accum": 2,
                              "quant_storage": "bf16"},
                             {"dp": 2, "sharding": "fsdp-full-shard", "offload": "optimizer+params"}),
    "ZeRO-3 QLoRA": ({"precision": "bf16-mixed", "finetune": "qlora", "micro_batch": 2, "grad_accum": 2,
                      "quant_storage": "bf16"}, {"dp": 2, "sharding": "zero3"}),
    "ZeRO-3 LoRA": ({"precision": "bf16-mixed", "finetune": "lora", "micro_batch": 8, "grad_accum": 4},
                    {"dp": 8, "sharding": "zero3"}),
}


def peft_70b_rows(case: dict) -> list[Row]:
    rows = []
    model = get_preset("llama-2-70b")
    for method, gpus, gb in case["published"]["rows"]:
        if method not in PEFT_70B:
            rows.append(unconfigured(case["id"], method, f"no configuration for {method!r}"))
            continue
        knobs, parallel = PEFT_70B[method]
        training = {"seq_len": 2048, "checkpointing": "full", "attention": "flash", "lora_rank": 8,
                    "lora_targets": ("all-linear",), "lora_dropout": 0.1, **knobs}
        if training["finetune"] == "qlora":  # the guides (2024-03-13) need bitsandbytes>=0.43.0, the
            training["bnb_version"] = "<=0.43.1"  # newest then; 0.43.2 came in July 2024
        parallel = dict(parallel)
        if parallel["sharding"] == "zero3":  # Accelerate's "auto" ZeRO buckets from the hidden size
            h = model.hidden_size
            parallel["zero"] = ZeroConfig(reduce_bucket_size=h * h, prefetch_bucket_size=int(0.9 * h * h),
                                          param_persistence_threshold=10 * h)
        rows.append(Row(case["id"], f"Llama-2-70B {method} {gpus} GPUs", model, training, parallel, H100_SXM,
                        SINGLE, memory_gib=gb, memory_metric="device", split=case.get("split", "held-out"),
                        assumed="the screenshots' memory in use read as GiB; Accelerate's auto ZeRO buckets"))
    return rows


# AWS g5's A10G: only its memory is compared (the A10 datasheet's dense rates, not A10G-specific)
A10G = GPUSpec("A10G 24GB", 24 * 10**9, 125, None, 31.2, 600)


def philschmid_qlora_rows(case: dict) -> list[Row]:
    """Llama 3 70B FSDP1 QLoRA with parameter offload (the notebook's yaml and run_fsdp_qlora.py):
    bf16 model and quant storage, r 16 all-linear, LoRA dropout 0.05, packed 3072-token samples,
    batch 1, grad accum 2, reentrant checkpointing, SDPA."""
    rows = []
    for setup, gpus, gb in case["published"]["rows"]:
        if setup != "FSDP QLoRA + CPU offload":
            rows.append(unconfigured(case["id"], setup, f"no configuration for {setup!r}"))
            continue
        training = {"precision": "bf16", "finetune": "qlora", "quant_storage": "bf16", "micro_batch": 1,
                    "grad_accum": 2, "seq_len": 3072, "checkpointing": "full", "attention": "sdpa",
                    "lora_rank": 16, "lora_targets": ("all-linear",), "lora_dropout": 0.05,
                    "bnb_version": "<=0.43.1"}  # the notebook pins bitsandbytes==0.43.1
        rows.append(Row(case["id"], f"Llama-3-70B {setup} {gpus} GPUs", get_preset("llama-3.1-70b"), training,
                        {"dp": gpus, "sharding": "fsdp-full-shard", "offload": "optimizer+params"}, A10G,
                        Interconnect.pcie(4), memory_gib=gb, memory_metric="device",
                        split=case.get("split", "held-out"),
                        assumed="Llama 3 70B as the llama-3.1-70b shape (same layers and vocabulary); the"
                                " notebook's 22 GB read as GiB, the device's memory in use"))
    return rows


# litgpt's config hub (config_hub/finetune/README.md): models as litgpt's Config defines them, by
# the README's model column; the Llama-architecture ones as config.json fields of their HF twins.
# litgpt's GPT keeps lm_head as its own weight: its finetune scripts do not tie embeddings (they
# list train.tie_embeddings as unsupported), so Llama 3.2 and Gemma run untied here.
LITGPT_HF = {
    "llama-3.2-1b": {"model_type": "llama", "vocab_size": 128256, "hidden_size": 2048,
                     "intermediate_size": 8192, "num_hidden_layers": 16, "num_attention_heads": 32,
                     "num_key_value_heads": 8, "head_dim": 64},
    "llama-3.2-3b": {**LLAMA_32_3B, "tie_word_embeddings": False},
    "tiny-llama": {"model_type": "llama", "vocab_size": 32000, "hidden_size": 2048, "intermediate_size": 5632,
                   "num_hidden_layers": 22, "num_attention_heads": 32, "num_key_value_heads": 4},
    # Phi-3-mini: RMSNorm, SwiGLU (fused gate/up), full RoPE, no biases, MHA: a Llama shape
    "Phi-3-mini-4k-instruct": {"model_type": "llama", "vocab_size": 32064, "hidden_size": 3072,
                               "intermediate_size": 8192, "num_hidden_layers": 32, "num_attention_heads": 32,
                               "num_key_value_heads": 32},
    # Gemma 1: GeGLU (tanh GELU) where Llama has SwiGLU, head_dim 256
    "gemma-2b": {"model_type": "llama", "vocab_size": 256000, "hidden_size": 2048, "intermediate_size": 16384,
                 "num_hidden_layers": 18, "num_attention_heads": 8, "num_key_value_heads": 1,
                 "head_dim": 256},
    "gemma-7b": {"model_type": "llama", "vocab_size": 256000, "hidden_size": 3072, "intermediate_size": 24576,
                 "num_hidden_layers": 28, "num_attention_heads": 16, "num_key_value_heads": 16,
                 "head_dim": 256},
}
LITGPT_PRESETS = {"llama-2-7b": "llama-2-7b", "llama-3-8b": "llama-3.1-8b", "llama-3.1-8b": "llama-3.1-8b",
                  "mistral-7b": "mistral-7b", "mistral-7b-v0.2": "mistral-7b"}
LITGPT_NOT_EXPRESSED = {  # architectures no model family of the estimator has
    "falcon-7b": "Falcon-7B's parallel attention + MLP block on one LayerNorm with multi-query attention and"
                 " rotary positions: no model family of the estimator",
    "phi-2": "Phi-2's parallel attention + MLP block (LayerNorm, GELU MLP, biases, partial rotary): no model"
             " family of the estimator",
    "stablelm-base-alpha-3b": "StableLM-Alpha's GPT-NeoX parallel residual (partial rotary, LayerNorm,"
                              " GELU MLP): no model family of the estimator",
}
# Gemma 2 by the config's folder (the README's model column says gemma-2b for gemma2-2b), untied
# like every litgpt model here
LITGPT_GEMMA2 = {"gemma2-2b": "gemma-2-2b", "gemma2b": "gemma-2-2b", "gemma2-9b": "gemma-2-9b"}
LITGPT_LORA = {"query": ("q_proj",), "key": ("k_proj",), "value": ("v_proj",), "projection": ("o_proj",),
               "mlp": ("gate_proj", "up_proj", "down_proj"), "head": ("lm_head",)}


def litgpt_model(config: str, name: str) -> ModelSpec | str:
    """The model of a config hub row, or why the estimator cannot express it."""
    if (folder := config.split("/")[0]) in LITGPT_GEMMA2:
        return replace(get_preset(LITGPT_GEMMA2[folder]), tie_word_embeddings=False)
    if name in LITGPT_NOT_EXPRESSED:
        return LITGPT_NOT_EXPRESSED[name]
    if name in LITGPT_PRESETS:
        return get_preset(LITGPT_PRESETS[name])
    if name in LITGPT_HF:
        return model_from_hf_config(LITGPT_HF[name], name=name)
    return f"no configuration for the model {name!r}"


# Lightning's BitsandbytesPrecision modes: "nf4" is Linear4bit(compress_statistics=False), "nf4-dq" True
LIGHTNING_NF4 = {"bnb.nf4": False, "bnb.nf4-dq": True}


def litgpt_not_compared(y: dict | None, key: str, gpu: str, gpus: int, peak_gb: float | None,
                        model: ModelSpec | str, method: str) -> str | None:
    """Why a config hub row is not compared (None: it is)."""
    return next((w for cond, w in (
        (y is None, f"the case has no yaml settings for {key!r}"),
        (gpu != "A10G", f"no configuration for the GPU {gpu!r}"),
        (peak_gb is None, "the run went out of memory on the A10G: no peak to compare"),
        (y is not None and gpus != y["devices"] and y["devices"] == 1,
         "the same run as the 1xA10G row (the yaml says devices: 1; the same peak, runtime within 1 %):"
         " not a 4-GPU run, not counted twice"),
        (y is not None and gpus != y["devices"], f"the README's {gpus} GPUs against the yaml's devices:"
                                                 f" {y and y['devices']}"),
        (isinstance(model, str), model),
        (method not in ("full", "lora", "qlora"), f"no configuration for the method {method!r}"),
    ) if cond), None)


def litgpt_rows(case: dict) -> list[Row]:
    """litgpt's config hub on A10Gs: each row as its yaml (read at the commit of the README line) and
    litgpt's finetune scripts ran it; memory as the scripts print it (max_memory_allocated / 1e9)."""
    rows, yamls = [], case["config"]["yamls"]
    for config, name, gpus, gpu, peak_gb, _runtime, key in case["published"]["rows"]:
        label = f"{config} {gpus}x{gpu}"
        y, method = yamls.get(key), config.split("/")[-1].removesuffix(".yaml")
        model = litgpt_model(config, name)
        if why := litgpt_not_compared(y, key, gpu, gpus, peak_gb, model, method):
            rows.append(unconfigured(case["id"], label, why))
            continue
        mbs, seq = y["micro_batch_size"], y["max_seq_length"]
        unmodelled, assumed = [], ["peak at a batch padded to max_seq_length (a sample reaches it: the"
                                   " source's phi-2 log; assumed for this tokenizer); published GB read as"
                                   " 1e9 bytes"]
        if method == "full":
            own = 8 * model.params.total / gpus  # bf16 weights + grads + two bf16 AdamW states
            if own > peak_gb * 1e9:
                rows.append(unconfigured(case["id"], label, (
                    "did not run as stated: bf16 weights, gradients and AdamW states alone are"
                    f" {own / 1e9:.1f} GB per GPU, above the published {peak_gb} GB peak")))
                continue
            training = {"finetune": "full", "loss_chunks": -(-mbs * (seq - 1) // 128)}
            assumed.append("full.py slices logits[..., :-1, :] and reshapes: one more bf16 logits copy")
        else:
            training = {"finetune": method, "lora_rank": y["lora_r"], "lora_dropout": y["lora_dropout"],
                        "lora_targets": tuple(t for k in y["lora_on"] for t in LITGPT_LORA[k]),
                        "loss_chunks": -(-seq // 128)}  # lm_head_chunk_size=128
            assumed.append("litgpt's fused-QKV adapter drops its input once for q and v (the estimator:"
                           " one copy per adapter)")
        if method == "qlora":  # litgpt's optimizer under bnb quantisation: bitsandbytes' PagedAdamW;
            # Lightning's BitsandbytesPrecision made every nn.Linear, the head too, 4-bit from fp16
            training |= {"optimizer": "adamw-paged", "bnb_version": "<=0.43.1", "nf4_quantizer": "lightning"}
            if y["quantize"] in LIGHTNING_NF4:
                training["nf4_double_quant"] = LIGHTNING_NF4[y["quantize"]]
            else:
                unmodelled.append(f"quantize {y['quantize']}: not bitsandbytes' NF4")
        if model.softcap_scores:  # litgpt computes capped scores by hand (q @ k.mT, tanh, mask, softmax)
            assumed.append("Gemma 2's soft-capped attention as eager attention (litgpt's own math)")
        training |= {"precision": "bf16", "micro_batch": mbs, "seq_len": seq,
                     "grad_accum": max(1, y["global_batch_size"] // (mbs * gpus)),
                     "attention": "eager" if model.softcap_scores else "sdpa",
                     "checkpointing": "full" if gpus > 1 else "none", "loss": "chunked"}
        parallel = {}
        if gpus > 1:  # Fabric's FSDPStrategy under bf16-true: bf16 params, reductions and buffers
            parallel = {"dp": gpus, "sharding": "fsdp-full-shard", "fsdp_reduce_dtype": "bf16"}
            # micro-batches accumulate under fabric.no_backward_sync, which is FSDP1's no_sync()
            parallel["fsdp_no_sync"] = True
        assumed.append("cross-entropy on bf16 chunks (the estimator's chunked loss keeps fp32 log-softmax)")
        if name.startswith("gemma") and not model.softcap_scores:
            assumed.append("Gemma's GeGLU as SwiGLU (both keep the gate input and the up output)")
        rows.append(Row(case["id"], label, model, training, parallel, A10G, Interconnect.pcie(4),
                        memory_gib=peak_gb * 1e9 / GIB, memory_metric="active", unmodelled=unmodelled,
                        split=case.get("split", "held-out"), assumed="; ".join(assumed)))
    return rows


BUILDERS = {
    "korthikanti_table5_e2e": korthikanti_rows,
    "narayanan_table1_weak_scaling": narayanan_rows,
    "llm_foundry_mpt_throughput": foundry_rows,
    "flashattention_readme": flashattention_rows,
    "torchtitan_llama3.1_8B_fsdp_8gpu": torchtitan_rows,
    "torchtune_readme_optimization_ladder": torchtune_rows,
    "peft_metamathqa_llama3.2_3B": peft_rows,
    "torchtitan_llama3_h100_202412_multid": titan_multid_rows,
    "torchtitan_asynctp_h100_202506": titan_asynctp_rows,
    "torchtitan_llama3_8b_h200_202506_trainy": titan_h200_rows,
    "torchtune_llama3.1_readme_202409": torchtune_llama31_rows,
    "nemo_performance_summary_2407_pretrain": nemo_pretrain_rows,
    "nemo_performance_summary_2407_finetune": nemo_finetune_rows,
    "fms_fsdp_llama2_throughput": fms_fsdp_rows,
    "peft_docs_llama2_70b_fsdp_deepspeed": peft_70b_rows,
    "llm_foundry_mpt_throughput_readme": foundry_rows,
    "peft_metamathqa_llama3.2_3B_variants": peft_rows,
    "peft_metamathqa_llama3.2_3B_step_times": peft_time_rows,
    "philschmid_fsdp_qlora_llama3_70b": philschmid_qlora_rows,
    "litgpt_config_hub_finetune_a10g": litgpt_rows,
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
    # a paged optimizer's states are on the device, outside PyTorch's allocator (and its counters)
    allocated = g.total - g.framework_overhead - est.memory.outside_allocator_bytes
    if metric == "active":
        return allocated / GIB
    if metric == "device":  # the device's memory in use (nvidia-smi): everything on the GPU
        return g.total / GIB
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
    out = {"case": row.case, "row": row.label, "split": row.split, "extra": row.extra, "assumed": row.assumed}
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


def rows(path: Path = CASES_PATH, extra: Path | None = EXTRA_PATH) -> list[Row]:
    """The rows of the cases file (the reference file by default: its cases are calibration
    unless a case says otherwise) and of the extra file (bench/published_cases_extra.json: each
    case says its split; held-out unless it says calibration)."""
    out = []
    for file, default_split in ((path, "calibration"), (extra, "held-out")):
        if file is None:
            continue
        cases = {c["id"]: c for c in json.loads(Path(file).read_text())["cases"]}
        for cid, build in BUILDERS.items():
            if cid in cases:
                split = cases[cid].get("split", default_split)
                for row in _build(build, cases[cid]):
                    row.split = split if split in SPLITS else default_split
                    row.extra = file is extra
                    out.append(row)
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


def summary(results: list[dict], key: str) -> str:
    errs = [abs(r[key][2]) for r in results if key in r]
    if not errs:
        return f"{key}: 0 rows"
    beyond = sum(e > 0.25 for e in errs)
    return (f"{key}: {len(errs)} rows, median |error| {statistics.median(errs):.1%},"
            f" max |error| {max(errs):.1%}, beyond 25%: {beyond}")


def table(results: list[dict], key: str, unit: str, split: str = "") -> list[str]:
    title = f"## {split + ' ' if split else ''}{key} ({unit})"
    lines = [title, "", "| case | row | published | ours | error |", "| --- | --- | ---: | ---: | ---: |"]
    chosen = [r for r in results if key in r]
    for r in chosen:
        pub, ours, err = r[key]
        lines.append(f"| {r['case']} | {r['row']} | {pub:,.1f} | {ours:,.1f} | {err:+.1%} |")
    if chosen:
        lines += ["", f"{split + ' ' if split else ''}{summary(chosen, key)}", ""]
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
    parser.add_argument("--extra", type=Path, default=None,
                        help=f"a second cases file whose cases carry their split (default {EXTRA_PATH.name}"
                             " when --cases is not given)")
    parser.add_argument("--no-extra", action="store_true", help="the cases file alone")
    args = parser.parse_args(argv)
    if not args.cases.exists():
        parser.error(f"{args.cases} does not exist; give --cases PATH to {CASES_NAME}")
    extra = args.extra
    if extra is None and args.cases == CASES_PATH and not args.no_extra:
        extra = EXTRA_PATH  # another --cases file is read alone unless --extra names one
    if args.no_extra:
        extra = None
    results = [evaluate(r, nearest=args.closest) for r in rows(args.cases, extra)]
    if args.json:
        print(json.dumps(results, indent=1, default=str))
        return
    lines = []
    for split in SPLITS:
        part = [r for r in results if r["split"] == split]
        lines += table(part, "memory", "GiB per GPU", split)
        lines += table(part, "throughput", "tokens/s per GPU", split)
    lines += ["## unmodelled", ""]
    for r in results:
        if "unmodelled" in r:
            lines.append(f"- [{r['split']}] {r['case']} / {r['row']}: unmodelled: {r['unmodelled']}")
    for cid, why in NOT_RUNS.items():
        lines.append(f"- {cid}: not a configurable training run ({why})")
    lines += ["", "## summary", ""]
    groups = [(split, [r for r in results if r["split"] == split]) for split in SPLITS]
    groups.insert(1, ("  of which the cases file", [r for r in results if r["split"] == "calibration"
                                                    and not r["extra"]]))
    for name, part in groups:
        unmodelled = sum("unmodelled" in r for r in part)
        lines += [f"{name} {summary(part, 'memory')}", f"{name} {summary(part, 'throughput')}",
                  f"{name} unmodelled: {unmodelled} rows"]
    print("\n".join(lines))


if __name__ == "__main__":
    main()
