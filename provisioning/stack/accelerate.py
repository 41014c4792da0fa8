"""The Accelerate config of the ``fsdp`` stack (FSDP2) and of the ``deepspeed`` stack (DeepSpeed
through Accelerate), one per node (``machine_rank``).

``launch.sh --stack train.py`` on every node runs ``accelerate launch --config_file
/etc/trainyard/accelerate.yaml train.py``: the file carries the multi-node fields (machines,
processes, this node's rank, the first node's fabric address and port, static rendezvous).

FSDP2: ``fsdp_version: 2``; ``fsdp_reshard_after_forward`` true for full/hybrid sharding (ZeRO-3
like) and false for ``fsdp-shard-grad-op`` (ZeRO-2 like); the auto-wrap class is the decoder layer
of the model's Hugging Face ``model_type`` (``configs_common.layer_class``); activation
checkpointing as every stack renders the plan's policy (Accelerate has whole-layer checkpointing
only: ``full`` renders true; ``selective`` renders false under SDPA/FlashAttention, which keep no
attention scores; op-level ``selective-op`` is refused by the stack check); bf16 mixed precision
(fp16 for an fp16 plan, none for fp32). Hybrid sharding shards within a node and replicates
across nodes (Accelerate's ``parallelism_config``).

DeepSpeed: ``distributed_type: DEEPSPEED`` with ``deepspeed_config_file`` pointing at
``deepspeed.json`` (which then holds every DeepSpeed setting: Accelerate refuses the same
settings in both places, so this file names no mixed precision) and the ``standard`` multi-node
launcher (torchrun on each node; no pdsh, no SSH between nodes).
"""

from __future__ import annotations

import yaml

from provisioning.stack.configs_common import layer_class
from provisioning.stack.inputs import StackInputs

DEEPSPEED_JSON = "/etc/trainyard/deepspeed.json"


def mixed_precision(precision: str) -> str:
    return {"fp32": "no", "fp16-mixed": "fp16"}.get(precision, "bf16")


def _machines(inputs: StackInputs) -> dict:
    config = {
        "compute_environment": "LOCAL_MACHINE",
        "debug": False,
        "downcast_bf16": "no",
        "enable_cpu_affinity": False,
        "machine_rank": inputs.node_rank,
        "main_training_function": "main",
        "num_machines": inputs.nnodes,
        "num_processes": inputs.world_size,
        "rdzv_backend": "static",
        "same_network": True,
        "use_cpu": False,
    }
    if inputs.cluster:
        config["main_process_ip"] = inputs.master_addr
        config["main_process_port"] = inputs.master_port
    return config


def accelerate_config(inputs: StackInputs) -> dict:
    t = inputs.training
    fsdp = {
        "fsdp_version": 2,
        "fsdp_auto_wrap_policy": "TRANSFORMER_BASED_WRAP",
        "fsdp_transformer_layer_cls_to_wrap": layer_class(t.model_type),
        "fsdp_reshard_after_forward": t.sharding != "fsdp-shard-grad-op",
        "fsdp_activation_checkpointing": t.activation_checkpointing != "none",
        "fsdp_offload_params": t.offload != "none",
        "fsdp_state_dict_type": "SHARDED_STATE_DICT",
        "fsdp_cpu_ram_efficient_loading": True,
    }
    config = {**_machines(inputs), "distributed_type": "FSDP", "fsdp_config": fsdp,
              "mixed_precision": mixed_precision(t.precision)}
    if t.sharding == "fsdp-hybrid" and inputs.cluster:
        config["parallelism_config"] = {
            "parallelism_config_dp_replicate_size": inputs.nnodes,
            "parallelism_config_dp_shard_size": inputs.nproc_per_node,
        }
    return config


def accelerate_deepspeed_config(inputs: StackInputs) -> dict:
    stage3 = inputs.training.shards_params
    return {**_machines(inputs), "distributed_type": "DEEPSPEED",
            "deepspeed_config": {"deepspeed_config_file": DEEPSPEED_JSON,
                                 "deepspeed_multinode_launcher": "standard",
                                 "zero3_init_flag": stage3}}


def render_accelerate(inputs: StackInputs) -> str:
    kind = "FSDP2" if inputs.strategy == "fsdp" else "DeepSpeed, settings in deepspeed.json"
    config = accelerate_config(inputs) if inputs.strategy == "fsdp" else accelerate_deepspeed_config(inputs)
    head = (f"# Accelerate ({kind}) config of {inputs.hostname}, order {inputs.order}.\n"
            "# /etc/trainyard/launch.sh --stack train.py   (accelerate launch --config_file "
            "this file train.py)\n")
    return head + yaml.safe_dump(config, sort_keys=True)
