"""The DeepSpeed JSON of the ``deepspeed`` stack: only keys DeepSpeed reads.

ZeRO stage from the plan's sharding (``zero1``/``zero2``/``zero3``; FSDP names map to their
ZeRO equivalents, ``none`` to stage 0); CPU offload of the optimizer (any stage) and of the
parameters (stage 3 only); bucket sizes from the model's hidden size as DeepSpeed's own "auto"
values are computed (h², 0.9·h², 10·h); bf16 (or fp16) from the precision; micro-batch and
gradient accumulation from the plan. DeepSpeed derives ``train_batch_size`` from those and the
world size.
"""

from __future__ import annotations

import json

from provisioning.stack.inputs import StackInputs

STAGES = {"none": 0, "zero1": 1, "zero2": 2, "zero3": 3, "fsdp-shard-grad-op": 2,
          "fsdp-full-shard": 3, "fsdp-hybrid": 3}


def deepspeed_config(inputs: StackInputs) -> dict:
    t = inputs.training
    stage = STAGES[t.sharding]
    h = t.hidden_size
    zero: dict = {"stage": stage}
    if stage:
        zero.update({"overlap_comm": True, "contiguous_gradients": True,
                     "reduce_bucket_size": h * h})
    if stage in (1, 2):
        zero["allgather_bucket_size"] = h * h
    if stage == 3:
        zero.update({"stage3_prefetch_bucket_size": int(0.9 * h * h),
                     "stage3_param_persistence_threshold": 10 * h,
                     "stage3_gather_16bit_weights_on_model_save": True})
    if stage and t.offload_optimizer:
        zero["offload_optimizer"] = {"device": "cpu", "pin_memory": True}
    if stage == 3 and t.offload_params:
        zero["offload_param"] = {"device": "cpu", "pin_memory": True}
    config: dict = {
        "train_micro_batch_size_per_gpu": t.micro_batch,
        "gradient_accumulation_steps": t.grad_accum,
        "gradient_clipping": 1.0,
        "zero_optimization": zero,
    }
    if t.precision == "fp16-mixed":
        config["fp16"] = {"enabled": True}
    else:
        config["bf16"] = {"enabled": t.bf16}
    return config


def render_deepspeed(inputs: StackInputs) -> str:
    return json.dumps(deepspeed_config(inputs), indent=2) + "\n"
