"""Training memory and compute estimator (pure Python, stdlib only).

    from portal.sizing.estimator import (
        get_preset, TrainingConfig, ParallelConfig, GPUSpec, Interconnect, estimate)

    model = get_preset("llama-3.1-8b")                # or model_from_hf_config(dict)
    est = estimate(                                     #   or model_from_params(...)
        model,
        TrainingConfig(precision="bf16-mixed", optimizer="adamw", micro_batch=1,
                       seq_len=8192, checkpointing="full", attention="sdpa"),
        ParallelConfig(dp=8, sharding="fsdp-full-shard"),
        gpu=GPUSpec("H100 SXM", memory_bytes=80 * 10**9, bf16_tflops=989, fp8_tflops=1979,
                    fp32_tflops=67, memory_bandwidth_gbps=3350),
        interconnect=Interconnect.nvlink(900),
        train_tokens=1e12,
    )
    est.per_gpu.total         # bytes on the busiest GPU
    est.params.active         # parameters per token
    est.compute.step_seconds  # with a GPU
    est.to_dict()             # JSON-ready

The memory part does not depend on the GPU or the link; to estimate one setup on many GPUs,
work out its memory once and add each GPU (estimate() is exactly this composition):

    memory = estimate_memory(model, training, parallel)      # per_gpu, params, checkpoint
    for gpu, link in servers:
        est = estimate_from_memory(memory, gpu, link, train_tokens=1e12)
        # or just the step time: estimate_compute(memory, gpu, link, train_tokens, mfu=0.4)

Bad input raises ValueError with a message a user can act on. Method and sources:
docs/sizing.md.
"""

from .api import (
    ESTIMATOR_VERSION,
    CheckpointSize,
    ComputeEstimate,
    Estimate,
    MemoryBreakdown,
    MemoryEstimate,
    StepFacts,
    attention_for,
    clear_caches,
    comm_floor,
    comm_volume,
    estimate,
    estimate_compute,
    estimate_from_memory,
    estimate_memory,
    flop_rate,
)
from .config import GPUSpec, HostSpec, Interconnect, ParallelConfig, TrainingConfig, ZeroConfig
from .dtypes import DType
from .hf_config import model_from_hf_config
from .models import ModelSpec, ParamCounts, model_from_params
from .presets import get_preset, list_presets

__all__ = [
    "CheckpointSize",
    "ComputeEstimate",
    "DType",
    "Estimate",
    "GPUSpec",
    "Interconnect",
    "MemoryBreakdown",
    "MemoryEstimate",
    "ModelSpec",
    "ParallelConfig",
    "ParamCounts",
    "StepFacts",
    "TrainingConfig",
    "ZeroConfig",
    "HostSpec",
    "attention_for",
    "clear_caches",
    "estimate",
    "ESTIMATOR_VERSION",
    "estimate_compute",
    "estimate_from_memory",
    "estimate_memory",
    "comm_floor",
    "comm_volume",
    "flop_rate",
    "get_preset",
    "list_presets",
    "model_from_hf_config",
    "model_from_params",
]
