"""The torchtitan job config (TOML, torchtitan 0.2.2's ``JobConfig``) of the ``torchtitan`` stack.

``launch.sh -m torchtitan.train --job.config_file /etc/trainyard/torchtitan.toml`` on every node.
Tensor, pipeline and context parallel degrees from the plan; the data-parallel shard degree is
what is left (-1); hybrid sharding replicates across nodes. float8 linears for an fp8 plan
(``model.converters``); activation checkpointing as the plan says; torch.compile on. The local
batch is the plan's micro-batch (with pipelining: micro-batch × accumulation, cut into
micro-batches); the global batch carries the accumulation.
"""

from __future__ import annotations

import tomli_w

from provisioning.stack.configs_common import billions
from provisioning.stack.inputs import CHECKPOINT_DIR, StackInputs

DATA_ROOT = "/data"


def flavor(model: str) -> str:
    """torchtitan's llama3 flavor nearest the model's size."""
    size = billions(model)
    if size is None or size <= 20:
        return "8B"
    return "70B" if size <= 150 else "405B"


def torchtitan_config(inputs: StackInputs, *, train_steps: int = 0) -> dict:
    t = inputs.training
    model_parallel = t.tp * t.pp * t.cp
    dp = max(1, inputs.world_size // model_parallel)
    local = t.micro_batch * t.grad_accum if t.pp > 1 else t.micro_batch
    replicate = inputs.nnodes if t.sharding == "fsdp-hybrid" and inputs.cluster else 1
    reshard = "never" if t.sharding == "fsdp-shard-grad-op" else "default"
    parallelism = {
        "data_parallel_replicate_degree": replicate,
        "data_parallel_shard_degree": -1,
        "fsdp_reshard_after_forward": reshard,
        "tensor_parallel_degree": t.tp,
        "pipeline_parallel_degree": t.pp,
        "context_parallel_degree": t.cp,
    }
    if t.pp > 1:
        parallelism.update({"pipeline_parallel_schedule": "1F1B",
                            "pipeline_parallel_microbatch_size": t.micro_batch})
    config = {
        "job": {"dump_folder": DATA_ROOT,
                "description": f"Trainyard order {inputs.order}: {t.model}"},
        "metrics": {"log_freq": 10, "enable_tensorboard": inputs.tracker == "tensorboard",
                    "save_tb_folder": "tensorboard", "enable_wandb": inputs.tracker == "wandb"},
        "model": {"name": "llama3", "flavor": flavor(t.model),
                  "hf_assets_path": f"{DATA_ROOT}/assets/{t.model}",
                  "converters": ["quantize.linear.float8"] if t.fp8 else []},
        "training": {"local_batch_size": local,
                     "global_batch_size": t.micro_batch * t.grad_accum * dp,
                     "seq_len": t.seq_len, "steps": train_steps or 1000,
                     "enable_cpu_offload": t.offload != "none",
                     "mixed_precision_param": "bfloat16" if t.bf16 else "float32"},
        "parallelism": parallelism,
        "checkpoint": {"enable": True, "folder": CHECKPOINT_DIR.removeprefix(DATA_ROOT + "/"),
                       "interval": 500, "keep_latest_k": 3, "async_mode": "async"},
        "activation_checkpoint": {"mode": t.checkpointing, "selective_ac_option": "op"},
        "compile": {"enable": True, "components": ["model", "loss"]},
    }
    if t.fp8:
        config["quantize"] = {"linear": {"float8": {
            "enable_fsdp_float8_all_gather": True,
            "precompute_float8_dynamic_scale_for_fsdp": True,
            "filter_fqns": ["output"]}}}
    return config


def render_torchtitan(inputs: StackInputs) -> str:
    head = (f"# torchtitan job config of order {inputs.order} (torchtitan 0.2.2).\n"
            "# launch.sh -m torchtitan.train --job.config_file /etc/trainyard/torchtitan.toml\n")
    return head + tomli_w.dumps(torchtitan_config(inputs, train_steps=inputs.training.train_steps))
