"""The torchtitan job config (TOML, torchtitan 0.2.2's ``JobConfig``) of the ``torchtitan`` stack.

``launch.sh --stack`` on every node (``torchrun … -m torchtitan.train --job.config_file
/etc/trainyard/torchtitan.toml``). The model is torchtitan's ``llama3`` at the flavour whose
architecture is exactly the plan's model (``stacks.LLAMA3_FLAVOURS``); any other model is
refused (torchtitan 0.2.2 has no Mistral, Qwen2 or Mixtral, and a dense 8B under another name
would train the wrong model). Tensor, pipeline and context parallel degrees from the plan; the
data-parallel shard degree is what is left (-1); hybrid sharding replicates across nodes.
float8 linears for an fp8 plan (converter ``quantize.linear.float8``, needs torchao); activation
checkpointing ``none``, ``full``, or ``selective`` with ``selective_ac_option = "op"`` for the
plan's ``selective`` (the op-level SAC the recommender estimates for torchtitan) and
``selective-op``; torch.compile on. The local batch is the plan's micro-batch (with pipelining:
micro-batch x accumulation, cut into pipeline micro-batches of the micro-batch); the global
batch is the plan's, so torchtitan's own accumulation is the plan's. Steps: the plan's tokens over that batch.

Checkpoints: torchtitan purges old steps on rank 0 only, which on a cluster's node-local disks
would leave the other nodes' shards of purged steps behind (and may purge node 0's before the
sync timer copied them): a cluster renders ``keep_latest_k = 0`` and the sync timer prunes every
node after a verified upload (docs/stack.md, "Checkpoints on a cluster").
"""

from __future__ import annotations

import tomli_w

from portal.catalog.capabilities import MODEL_FAMILIES
from portal.sizing.recommend.stacks import rendered_checkpointing
from provisioning.stack.inputs import CHECKPOINTS_KEPT, StackInputs
from provisioning.stack.paths import CHECKPOINT_DIR, DATA

AC_MODES = {"none": "none", "full": "full", "op": "selective"}


def flavor(inputs: StackInputs) -> str:
    """torchtitan's llama3 flavour of exactly the plan's model; ValueError for any other model."""
    t = inputs.training
    if t.titan_flavour is None:
        known = MODEL_FAMILIES.get(t.architecture or "", "an architecture this portal has no numbers for")
        raise ValueError(f"torchtitan 0.2.2 builds llama3 at its 8B, 70B and 405B shapes only; "
                         f"{t.model} is {known}: choose a Hugging Face stack (FSDP2, DeepSpeed or "
                         f"DDP) for it")
    return t.titan_flavour


def torchtitan_config(inputs: StackInputs) -> dict:
    t = inputs.training
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
    checkpointing = rendered_checkpointing(t.checkpointing, t.attention, "torchtitan")
    ac = {"mode": AC_MODES[checkpointing]}
    if checkpointing == "op":
        ac["selective_ac_option"] = "op"
    config = {
        "job": {"dump_folder": DATA,
                "description": f"Trainyard order {inputs.order}: {t.model}"},
        "metrics": {"log_freq": 10, "enable_tensorboard": inputs.tracker == "tensorboard",
                    "save_tb_folder": "tensorboard", "enable_wandb": inputs.tracker == "wandb"},
        "model": {"name": "llama3", "flavor": flavor(inputs),
                  "hf_assets_path": f"{DATA}/assets/{t.model}",
                  "converters": ["quantize.linear.float8"] if t.fp8 else []},
        "training": {"local_batch_size": local, "global_batch_size": t.global_batch,
                     "seq_len": t.seq_len, "steps": t.train_steps or 1000,
                     "enable_cpu_offload": t.offload != "none",
                     "mixed_precision_param": "bfloat16" if t.bf16 else "float32"},
        "parallelism": parallelism,
        "checkpoint": {"enable": True, "folder": CHECKPOINT_DIR.removeprefix(DATA + "/"),
                       "interval": t.checkpoint_every_steps,
                       "keep_latest_k": 0 if inputs.cluster else CHECKPOINTS_KEPT,
                       "async_mode": "async"},
        "activation_checkpoint": ac,
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
            "# /etc/trainyard/launch.sh --stack   (torchrun -m torchtitan.train --job.config_file "
            "this file)\n")
    return head + tomli_w.dumps(torchtitan_config(inputs))
