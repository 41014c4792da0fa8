"""python manage.py estimate: memory and compute breakdown of one training setup."""

from __future__ import annotations

import json
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from portal.catalog.models import GPUModel
from portal.sizing.estimator import (
    GPUSpec,
    Interconnect,
    ParallelConfig,
    TrainingConfig,
    ZeroConfig,
    estimate,
    get_preset,
    list_presets,
    model_from_hf_config,
    model_from_params,
)
from portal.sizing.estimator.config import (
    ATTENTION,
    ATTENTION_KERNELS,
    CHECKPOINTING_POLICIES,
    FINETUNE,
    FLOAT8_RECIPES,
    GRAD_ACCUM_DTYPES,
    LOSSES,
    MIXED_LAYOUTS,
    NF4_QUANTIZERS,
    OFFLOAD,
    OPTIMIZER_IMPLS,
    OPTIMIZER_KINDS,
    PP_SCHEDULES,
    PRECISIONS,
    QUANT_STORAGES,
    REDUCE_DTYPES,
    SHARDING,
)

GIB = 2**30


def gpu_from_catalog(slug: str) -> tuple[GPUSpec, Interconnect]:
    """The catalog's GPUModel as the estimator's GPUSpec and a single-node interconnect."""
    try:
        g = GPUModel.objects.get(slug=slug)
    except GPUModel.DoesNotExist:
        known = ", ".join(GPUModel.objects.values_list("slug", flat=True)) or "none in catalog"
        raise CommandError(f"unknown GPU {slug!r}; known: {known}") from None
    spec = GPUSpec(
        name=g.name,
        memory_bytes=int(g.memory_gb * 10**9),
        bf16_tflops=float(g.bf16_tflops),
        fp8_tflops=float(g.fp8_tflops) if g.fp8_tflops else None,
        fp32_tflops=float(g.fp32_tflops),
        memory_bandwidth_gbps=float(g.memory_bandwidth_gbps),
    )
    if g.nvlink_gbps:
        link = Interconnect.nvlink(float(g.nvlink_gbps))
    else:
        link = Interconnect.pcie(g.pcie_gen if g.pcie_gen in (3, 4, 5) else 4)
    return spec, link


class Command(BaseCommand):
    help = "Estimate per-GPU memory, compute and checkpoint size of a training job."

    def add_arguments(self, parser):
        _model_arguments(parser)
        _training_arguments(parser)
        _parallel_arguments(parser)
        parser.add_argument("--gpu", help="catalog GPU slug, e.g. h100-sxm-80gb")
        parser.add_argument("--inter-node-gbit", type=float, default=None,
                            help="network per GPU in Gb/s (InfiniBand 400, Ethernet 100/1)")
        parser.add_argument("--train-tokens", type=float, default=None)
        parser.add_argument("--json", action="store_true", help="machine-readable output")

    def handle(self, *args, **o):
        if o["list_models"]:
            for name in list_presets():
                m = get_preset(name)
                self.stdout.write(f"{name:16} {m.params.total / 1e9:8.2f}B  {m.source}")
            return
        try:
            result = self._estimate(o)
        except OverflowError as exc:
            raise CommandError(f"a number is too large to size: {exc}") from exc
        except ValueError as exc:
            raise CommandError(str(exc)) from exc
        if o["json"]:
            data = result.to_dict() | {"outside_allocator_bytes": result.memory.outside_allocator_bytes}
            self.stdout.write(json.dumps(data, indent=2))
        else:
            self.stdout.write(render_table(result))

    def _estimate(self, o):
        if o["model"]:
            model = get_preset(o["model"])
        elif o["config"]:
            try:
                cfg = json.loads(Path(o["config"]).read_text())
            except (OSError, json.JSONDecodeError) as exc:
                raise ValueError(f"cannot read {o['config']}: {exc}") from exc
            model = model_from_hf_config(cfg)
        elif o["params"]:
            model = model_from_params(int(o["params"]), o["layers"], o["hidden"], o["heads"],
                                      o["vocab"], kv_heads=o["kv_heads"])
        else:
            raise ValueError("give --model, --config or --params (see --list-models)")
        training = TrainingConfig(
            precision=o["precision"], mixed_layout=o["mixed_layout"], optimizer=o["optimizer"],
            micro_batch=o["micro_batch"], seq_len=o["seq_len"], grad_accum=o["grad_accum"],
            checkpointing=o["checkpointing"], attention=o["attention"], finetune=o["finetune"],
            lora_rank=o["lora_rank"],
            lora_targets=tuple(x for x in o["lora_targets"].split(",") if x), lora_dropout=o["lora_dropout"],
            use_dora=o["use_dora"],
            compile=o["compile"], compile_loss=o["compile_loss"], loss=o["loss"],
            float8_recipe=o["float8_recipe"], float8_all_gather=o["float8_all_gather"],
            optimizer_impl=o["optimizer_impl"], quant_storage=o["quant_storage"],
            nf4_double_quant=o["nf4_double_quant"], nf4_quantizer=o["nf4_quantizer"],
            attention_kernel=o["attention_kernel"],
        )
        parallel = ParallelConfig(
            dp=o["dp"], sharding=o["sharding"], offload=o["offload"], tp=o["tp"], sp=o["sp"],
            pp=o["pp"], pp_microbatches=o["pp_microbatches"], ep=o["ep"], cp=o["cp"],
            pp_interleave=o["pp_interleave"], pp_schedule=o["pp_schedule"], async_tp=o["async_tp"],
            hybrid_shard_size=o["hybrid_shard_size"], fsdp_reduce_dtype=o["fsdp_reduce_dtype"],
            zero=ZeroConfig(grad_accum_dtype=o["grad_accum_dtype"]),
            cp_load_balance=not o["cp_no_load_balance"], host_threads_per_rank=o["host_threads_per_rank"],
        )
        gpu = link = None
        if o["gpu"]:
            gpu, link = gpu_from_catalog(o["gpu"])
            if o["inter_node_gbit"] is not None:
                link = Interconnect(intra_node_gbps=link.intra_node_gbps,
                                    inter_node_gbit=o["inter_node_gbit"],
                                    intra_kind=link.intra_kind)
        return estimate(model, training, parallel, gpu=gpu, interconnect=link,
                        train_tokens=o["train_tokens"])


def render_table(e) -> str:
    rows = [f"Model {e.model}: {e.params.total / 1e9:.2f}B parameters "
            f"({e.params.trainable / 1e9:.3f}B trainable, {e.params.active / 1e9:.2f}B active)",
            f"Layout: {e.layout}, world size {e.world_size}", "",
            f"{'Per GPU':22}{'GiB':>10}"]
    for key, value in e.to_dict()["per_gpu_bytes"].items():
        if key == "total":
            rows.append("-" * 32)
        rows.append(f"{key:22}{value / GIB:10.2f}")
    if e.memory.outside_allocator_bytes:  # a paged optimizer's states, in CUDA unified memory
        rows.append(f"{'of which paged':22}{e.memory.outside_allocator_bytes / GIB:10.2f}")
    if e.fits is not None:
        rows.append(f"{'fits on the GPU':22}{'yes' if e.fits else 'NO':>10}")
    if e.cpu_bytes:
        rows.append(f"{'host RAM per node':22}{e.cpu_bytes / GIB:10.2f}")
    rows += ["", f"Checkpoint: model {e.checkpoint.model_only_bytes / 1e9:.1f} GB, "
             f"full training state {e.checkpoint.full_state_bytes / 1e9:.1f} GB"]
    c = e.compute
    if c:
        rows += [
            f"Compute: {c.model_flops_per_token / 1e9:.1f} GFLOP/token, step {c.step_seconds:.2f} s"
            f" ({c.tokens_per_step} tokens), {c.tokens_per_second:,.0f} tokens/s at MFU {c.mfu:.0%}",
            f"Communication exposed {c.exposed_comm_seconds:.3f} s/step; "
            f"pipeline bubble {c.bubble_fraction:.1%}",
        ]
        if c.time_to_train_seconds:
            rows.append(f"Time to train: {c.time_to_train_seconds / 86400:.1f} days")
    rows += ["", "Represents: " + "; ".join(e.represents)]
    if e.unmodelled:
        rows.append("unmodelled: [" + "; ".join(e.unmodelled) + "] (approximated)")
    return "\n".join(rows)


def _model_arguments(parser) -> None:
    src = parser.add_mutually_exclusive_group()
    src.add_argument("--model", help="preset name (see --list-models)")
    src.add_argument("--config", help="path to a Hugging Face config.json")
    src.add_argument("--params", type=float, help="bare parameter count, e.g. 7e9")
    parser.add_argument("--layers", type=int, default=32)
    parser.add_argument("--hidden", type=int, default=4096)
    parser.add_argument("--heads", type=int, default=32)
    parser.add_argument("--kv-heads", type=int, default=0)
    parser.add_argument("--vocab", type=int, default=32000)
    parser.add_argument("--list-models", action="store_true")


def _training_arguments(parser) -> None:
    parser.add_argument("--precision", choices=PRECISIONS, default="bf16-mixed")
    parser.add_argument("--mixed-layout", choices=MIXED_LAYOUTS, default=None,
                        help="autocast | master (DeepSpeed) | fsdp2 (FSDP2 MixedPrecisionPolicy)")
    parser.add_argument("--optimizer", choices=OPTIMIZER_KINDS, default="adamw")
    parser.add_argument("--optimizer-impl", choices=OPTIMIZER_IMPLS, default="default",
                        help="how the optimizer step runs (a CPU-offloaded step's host cost)")
    parser.add_argument("--micro-batch", type=int, default=1)
    parser.add_argument("--seq-len", type=int, default=2048)
    parser.add_argument("--grad-accum", type=int, default=1)
    parser.add_argument("--checkpointing", choices=CHECKPOINTING_POLICIES, default="none")
    parser.add_argument("--compile", action="store_true", help="torch.compile the model")
    parser.add_argument("--compile-loss", action="store_true", help="torch.compile the loss too")
    parser.add_argument("--loss", choices=LOSSES, default="full")
    parser.add_argument("--float8-recipe", choices=FLOAT8_RECIPES, default="tensorwise")
    parser.add_argument("--float8-all-gather", action="store_true",
                        help="FSDP2 all-gathers float8 weights (tensorwise)")
    parser.add_argument("--attention", choices=ATTENTION, default="sdpa")
    parser.add_argument("--attention-kernel", choices=ATTENTION_KERNELS, default="auto",
                        help="the fused attention kernel (auto: cuDNN under megatron-core and for"
                             " sdpa at head dims up to 128, as torch 2.13 picks it; else"
                             " FlashAttention-2, slower on Hopper; fa2 for SDPA on older torch)")
    parser.add_argument("--finetune", choices=FINETUNE, default="full")
    parser.add_argument("--lora-rank", type=int, default=16)
    parser.add_argument("--lora-targets", default="q_proj,k_proj,v_proj,o_proj",
                        help="comma-separated layer linears, or all-linear (the head left out);"
                             " lm_head adds an adapter on the output head")
    parser.add_argument("--lora-dropout", type=float, default=0.0,
                        help="PEFT's lora_dropout: each adapter keeps its own dropped input copy")
    parser.add_argument("--dora", dest="use_dora", action="store_true",
                        help="PEFT's use_dora: a magnitude vector per adapted linear, which keeps its base"
                             " and adapter outputs for backward")
    parser.add_argument("--quant-storage", choices=QUANT_STORAGES, default="auto",
                        help="QLoRA: bnb_4bit_quant_storage (a half type lets FSDP/ZeRO-3 shard the 4-bit"
                             " weights; auto: the half type under weight sharding), or torchao-nf4")
    parser.add_argument("--no-double-quant", dest="nf4_double_quant", action="store_false",
                        help="QLoRA: bitsandbytes NF4 without double quantisation"
                             " (bnb_4bit_use_double_quant=False: an fp32 absmax per 64 weights)")
    parser.add_argument("--nf4-quantizer", choices=NF4_QUANTIZERS, default="transformers",
                        help="QLoRA: who made the bitsandbytes 4-bit linears (lightning: litgpt's"
                             " BitsandbytesPrecision, the head too, quantised from fp16)")


def _parallel_arguments(parser) -> None:
    parser.add_argument("--dp", type=int, default=1)
    parser.add_argument("--sharding", choices=SHARDING, default="none")
    parser.add_argument("--offload", choices=OFFLOAD, default="none")
    parser.add_argument("--tp", type=int, default=1)
    parser.add_argument("--sp", action="store_true", help="sequence parallel (with --tp)")
    parser.add_argument("--pp", type=int, default=1)
    parser.add_argument("--pp-microbatches", type=int, default=None)
    parser.add_argument("--ep", type=int, default=1)
    parser.add_argument("--cp", type=int, default=1, help="context parallel (ring attention)")
    parser.add_argument("--pp-interleave", type=int, default=1, help="virtual stages per GPU")
    parser.add_argument("--pp-schedule", choices=PP_SCHEDULES, default="1f1b")
    parser.add_argument("--async-tp", action="store_true")
    parser.add_argument("--cp-no-load-balance", action="store_true",
                        help="ring attention without the causal load balancing")
    parser.add_argument("--host-threads-per-rank", type=int, default=1,
                        help="OpenMP threads of each rank's CPU optimizer step (torchrun sets 1)")
    parser.add_argument("--hybrid-shard-size", type=int, default=8, help="fsdp-hybrid: shard group")
    parser.add_argument("--fsdp-reduce-dtype", choices=REDUCE_DTYPES, default="fp32")
    parser.add_argument("--grad-accum-dtype", choices=GRAD_ACCUM_DTYPES, default=None,
                        help="DeepSpeed data_types.grad_accum_dtype (default: the model dtype)")
