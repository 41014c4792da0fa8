"""Everything around the GPUs: NVMe, network, object storage, data format, training stack."""

from __future__ import annotations

import math

from portal.core.units import GB, TB

from .catalog import CatalogData, NetworkOptionSpec, NvmeOptionSpec, SkuSpec, StorageProviderSpec
from .plan import StackConfig
from .stacks import rendered_checkpointing
from .strategies import Strategy
from .types import DataAdvice, Workload

LOCAL_CHECKPOINTS_KEPT = 2  # full training states kept on local NVMe (latest + one to fall back on)
NVME_SCRATCH_FRACTION = 0.20  # of dataset + checkpoints: tokenised caches, logs, temp files
NVME_BASE_BYTES = 200 * GB  # OS, container images, Python environments, framework caches
TOKEN_CACHE_BYTES_PER_TOKEN = 4  # a pre-tokenised copy of the dataset (uint32 ids)
DATASET_ARRIVAL_WARN_HOURS = 1.0  # warn when downloading the dataset takes longer
LINK_PAYLOAD_EFFICIENCY = 0.85  # TCP/TLS payload share of the line rate for a bulk download
SMALL_FILES_THRESHOLD = 100_000  # above this many files, pack them into shards
SMALL_FILE_BYTES = 4 * 2**20  # "small" = under 4 MiB on average
SHARD_TARGET_BYTES = GB  # WebDataset shard size, kept between SHARD_MIN_BYTES and this
SHARD_MIN_BYTES = GB // 2
MAX_DATALOADER_WORKERS = 8


def checkpoint_local_bytes(full_state_bytes: int, model_only_bytes: int) -> int:
    return LOCAL_CHECKPOINTS_KEPT * full_state_bytes + model_only_bytes


def nvme_need_bytes(workload: Workload, full_state_bytes: int, model_only_bytes: int) -> int:
    """Per node: the dataset (raw + tokenised), kept checkpoints (a consolidated save may land
    on a single node, so every node is sized for the whole state), scratch and the base system."""
    data = workload.dataset_bytes + workload.dataset_tokens * TOKEN_CACHE_BYTES_PER_TOKEN
    ckpt = checkpoint_local_bytes(full_state_bytes, model_only_bytes)
    return int((data + ckpt) * (1 + NVME_SCRATCH_FRACTION) + NVME_BASE_BYTES)


def choose_nvme(options: tuple[NvmeOptionSpec, ...], need_bytes: int) -> tuple[NvmeOptionSpec | None, str]:
    """The cheapest option that holds need_bytes; RAID 0 before single drives at equal price
    (striping doubles read bandwidth; the dataset and checkpoints have copies elsewhere)."""
    if not options:
        return None, "the catalog has no NVMe options"
    rank = {"raid0": 0, "single": 1, "raid10": 2}
    fitting = [o for o in options if o.size_tb * TB >= need_bytes]
    if fitting:
        best = min(fitting, key=lambda o: (o.price_monthly_usd, o.size_tb, rank[o.raid]))
        return best, ""
    best = max(options, key=lambda o: (o.size_tb, -rank[o.raid]))
    return best, (
        f"the job wants {need_bytes / TB:.1f} TB of local NVMe per node but the largest option holds"
        f" {best.size_tb:g} TB: stream the dataset from object storage and keep fewer local checkpoints"
    )


def storage_need_tb(full_state_bytes: int, model_only_bytes: int, checkpoints_kept: int) -> int:
    """The bucket: the kept full training states (the bucket's versioning keeps that many) plus
    a model-only export, with 10 % to spare, in whole TB."""
    need = checkpoints_kept * full_state_bytes + model_only_bytes
    return max(1, math.ceil(need * 1.1 / TB))


def choose_storage(providers: tuple[StorageProviderSpec, ...]) -> StorageProviderSpec | None:
    """On-site MinIO when offered (same fabric, no egress fees), else the cheapest hosted one."""
    onsite = [p for p in providers if p.kind == "minio"]
    if onsite:
        return onsite[0]
    hosted = [p for p in providers if p.kind != "custom"]
    return min(hosted, key=lambda p: p.price_per_tb_monthly_usd) if hosted else None


def arrival_hours(dataset_bytes: int, speed_gbit_per_s: float) -> float:
    return dataset_bytes * 8 / (speed_gbit_per_s * 1e9 * LINK_PAYLOAD_EFFICIENCY) / 3600


def single_node_network(networks: tuple[NetworkOptionSpec, ...],
                        dataset_bytes: int) -> NetworkOptionSpec | None:
    """Single node: the default link unless the dataset would take hours over it; then the
    cheapest Ethernet option that brings it in within DATASET_ARRIVAL_WARN_HOURS."""
    if not networks:
        return None
    usable = [n for n in networks if not n.on_request and n.kind == "ethernet"] or list(networks)
    default = next((n for n in usable if n.is_default), min(usable, key=lambda n: n.price_monthly_usd))
    if arrival_hours(dataset_bytes, default.speed_gbit_per_s) <= DATASET_ARRIVAL_WARN_HOURS:
        return default
    quick = [n for n in usable
             if arrival_hours(dataset_bytes, n.speed_gbit_per_s) <= DATASET_ARRIVAL_WARN_HOURS]
    if quick:
        return min(quick, key=lambda n: (n.price_monthly_usd, -n.speed_gbit_per_s))
    return max(usable, key=lambda n: n.speed_gbit_per_s)


def multi_node_networks(networks: tuple[NetworkOptionSpec, ...]) -> tuple[NetworkOptionSpec, ...]:
    """Multi-node training needs InfiniBand; 1 Gb/s never carries a multi-node job. Without an
    InfiniBand option, Ethernet of 100 Gb/s and more (RoCE) is the fallback."""
    ib = tuple(n for n in networks if n.kind == "infiniband")
    if ib:
        return ib
    return tuple(n for n in networks if n.speed_gbit_per_s >= 100)


def network_warning(dataset_bytes: int, network: NetworkOptionSpec | None) -> str:
    if network is None or not dataset_bytes:
        return ""
    hours = arrival_hours(dataset_bytes, network.speed_gbit_per_s)
    if hours <= DATASET_ARRIVAL_WARN_HOURS:
        return ""
    return (
        f"the {dataset_bytes / TB:.2f} TB dataset takes about {hours:.1f} h to arrive over"
        f" {network.name}; upload it to object storage in advance or ship it on a drive"
    )


def dataloader_workers(sku: SkuSpec) -> int:
    """CPU cores per GPU minus one for the training process, between 2 and 8."""
    per_gpu = (sku.cpu_cores // sku.gpus_per_node) if sku.cpu_cores else 4
    return max(2, min(MAX_DATALOADER_WORKERS, per_gpu - 1))


def data_advice(workload: Workload, sku: SkuSpec, nodes: int,
                network: NetworkOptionSpec | None) -> DataAdvice:
    workers = dataloader_workers(sku)
    hours = arrival_hours(workload.dataset_bytes, network.speed_gbit_per_s) if network else 0.0
    files, size = workload.dataset_files, workload.dataset_bytes
    mean = size / files if files else 0
    if files > SMALL_FILES_THRESHOLD and mean < SMALL_FILE_BYTES and size:
        readers = sku.gpus_per_node * nodes * workers
        count = max(math.ceil(size / SHARD_TARGET_BYTES), 1)
        if size / readers >= SHARD_MIN_BYTES:
            count = max(count, readers)  # every DataLoader worker gets its own shard
        shard = size // count
        message = (
            f"{files:,} files of {mean / 1e3:.0f} kB on average: pack them into {count:,} WebDataset"
            f" tar shards of ~{shard / GB:.2f} GB so reads are sequential; {workers} DataLoader"
            " workers per GPU"
        )
        return DataAdvice("webdataset", count, shard, workers, hours, message)
    message = f"keep the files as they are; {workers} DataLoader workers per GPU"
    return DataAdvice("as-is", files, int(mean), workers, hours, message)


ZERO_STAGES = {"zero1": 1, "zero2": 2, "zero3": 3}


def stack_config(strategy: Strategy, stack: str, *, tp: int, pp: int, micro_batch: int, grad_accum: int,
                 checkpointing: str, workload: Workload, catalog: CatalogData) -> StackConfig:
    """The key settings of the launch config for the stack that runs the layout (`stack`, a
    slug that stacks.choose_stack picked from the catalog's declared capabilities)."""
    names = {s.slug: s.name for s in catalog.stack}
    precision = workload.precision
    dtype = "bf16" if precision.startswith("bf16") or precision == "fp8" else (
        "fp16" if precision.startswith("fp16") else "no")
    settings: list[tuple[str, object]] = []
    ckpt = rendered_checkpointing(checkpointing, workload.attention, stack)  # as the configs render it
    if stack == "ddp":
        settings += [("launcher", "torchrun"), ("mixed_precision", dtype),
                     ("gradient_accumulation_steps", grad_accum),
                     ("per_device_train_batch_size", micro_batch),
                     ("gradient_checkpointing", ckpt != "none")]
    elif stack == "fsdp":
        settings += [("fsdp_version", 2), ("fsdp_reshard_after_forward", True),
                     ("fsdp_auto_wrap_policy", "TRANSFORMER_BASED_WRAP"),
                     ("fsdp_state_dict_type", "SHARDED_STATE_DICT"),
                     ("fsdp_offload_params", strategy.offload != "none"),
                     ("fsdp_activation_checkpointing", ckpt != "none"),
                     ("mixed_precision", dtype), ("gradient_accumulation_steps", grad_accum),
                     ("per_device_train_batch_size", micro_batch)]
    elif stack == "torchtitan":
        settings += _torchtitan(strategy, tp=tp, pp=pp, micro_batch=micro_batch, grad_accum=grad_accum,
                                checkpointing=ckpt, precision=precision,
                                global_batch=workload.global_batch_sequences)
    elif strategy.sharding in ZERO_STAGES:
        stage = ZERO_STAGES[strategy.sharding]
        settings += [("zero_optimization.stage", stage),
                     ("train_micro_batch_size_per_gpu", micro_batch),
                     ("gradient_accumulation_steps", grad_accum), (f"{dtype}.enabled", dtype != "no")]
        if strategy.offload != "none":
            settings.append(("zero_optimization.offload_optimizer.device", "cpu"))
        if strategy.offload == "optimizer+params":
            settings.append(("zero_optimization.offload_param.device", "cpu"))
        if stage == 3:
            settings += [("zero_optimization.overlap_comm", True),
                         ("zero_optimization.stage3_gather_16bit_weights_on_model_save", True)]
        settings.append(("activation_checkpointing", ckpt))
    else:  # a stack slug this portal renders nothing for: what the plan asks of it
        settings += [("sharding", strategy.sharding), ("mixed_precision", dtype),
                     ("gradient_accumulation_steps", grad_accum), ("micro_batch", micro_batch),
                     ("activation_checkpointing", ckpt)]
    settings += _adapters(workload)
    return StackConfig(slug=stack, name=names.get(stack, stack), settings=tuple(settings))


def _torchtitan(strategy: Strategy, *, tp: int, pp: int, micro_batch: int, grad_accum: int,
                checkpointing: str, precision: str, global_batch: int) -> list[tuple[str, object]]:
    """torchtitan 0.2.2's job config keys (TOML section.key), as provisioning/stack/torchtitan.py
    renders them: the data-parallel shard degree is what the other dimensions leave (-1); there is
    no accumulation key, torchtitan derives it from the global and local batch; with pipelining
    the local batch is micro-batch x accumulation, cut into pipeline micro-batches."""
    out: list[tuple[str, object]] = [
        ("parallelism.data_parallel_shard_degree", -1),
        ("parallelism.tensor_parallel_degree", tp),
        ("parallelism.pipeline_parallel_degree", pp),
        ("training.local_batch_size", micro_batch * grad_accum if pp > 1 else micro_batch),
        ("training.global_batch_size", global_batch),
        ("training.mixed_precision_param", "float32" if precision == "fp32" else "bfloat16"),
        ("training.enable_cpu_offload", strategy.offload != "none"),
        ("activation_checkpoint.mode", {"op": "selective"}.get(checkpointing, checkpointing)),
    ]
    if checkpointing == "op":
        out.append(("activation_checkpoint.selective_ac_option", "op"))
    if tp > 1:
        out.append(("parallelism.enable_async_tensor_parallel", False))
    if pp > 1:
        out += [("parallelism.pipeline_parallel_schedule", "1F1B"),
                ("parallelism.pipeline_parallel_microbatch_size", micro_batch)]
    if precision == "fp8":
        out.append(("model.converters", ["quantize.linear.float8"]))
    return out


def _adapters(workload: Workload) -> list[tuple[str, object]]:
    """LoRA trains adapters on a frozen base; QLoRA also loads that base in 4 bits (NF4)."""
    if workload.finetune not in ("lora", "qlora"):
        return []
    out: list[tuple[str, object]] = [("adapters", "lora"), ("lora_r", workload.lora_rank or 16)]
    if workload.finetune == "qlora":
        out += [("base_weights", "4-bit NF4"), ("load_in_4bit", True), ("bnb_4bit_quant_type", "nf4"),
                ("bnb_4bit_compute_dtype", "bfloat16"), ("bnb_4bit_use_double_quant", True)]
    return out
