"""The Accelerate config of the ``fsdp`` stack (FSDP2), one per node (``machine_rank``).

``accelerate launch --config_file /etc/trainyard/accelerate.yaml train.py`` on every node.
FSDP2: ``fsdp_version: 2``; ``fsdp_reshard_after_forward`` true for full/hybrid sharding (ZeRO-3
like) and false for ``fsdp-shard-grad-op`` (ZeRO-2 like); the auto-wrap class is the model
family's decoder layer; activation checkpointing unless the plan says ``none``; bf16 mixed
precision (fp16 for an fp16 plan, none for fp32). Hybrid sharding shards within a node and
replicates across nodes (Accelerate's ``parallelism_config``).
"""

from __future__ import annotations

import yaml

from provisioning.stack.configs_common import layer_class
from provisioning.stack.inputs import StackInputs


def mixed_precision(precision: str) -> str:
    return {"fp32": "no", "fp16-mixed": "fp16"}.get(precision, "bf16")


def accelerate_config(inputs: StackInputs) -> dict:
    t = inputs.training
    fsdp = {
        "fsdp_version": 2,
        "fsdp_auto_wrap_policy": "TRANSFORMER_BASED_WRAP",
        "fsdp_transformer_layer_cls_to_wrap": layer_class(t.model, t.family),
        "fsdp_reshard_after_forward": t.sharding != "fsdp-shard-grad-op",
        "fsdp_activation_checkpointing": t.checkpointing != "none",
        "fsdp_offload_params": t.offload != "none",
        "fsdp_state_dict_type": "SHARDED_STATE_DICT",
        "fsdp_cpu_ram_efficient_loading": True,
    }
    config = {
        "compute_environment": "LOCAL_MACHINE",
        "debug": False,
        "distributed_type": "FSDP",
        "downcast_bf16": "no",
        "enable_cpu_affinity": False,
        "fsdp_config": fsdp,
        "machine_rank": inputs.node_rank,
        "main_training_function": "main",
        "mixed_precision": mixed_precision(t.precision),
        "num_machines": inputs.nnodes,
        "num_processes": inputs.world_size,
        "rdzv_backend": "static",
        "same_network": True,
        "use_cpu": False,
    }
    if inputs.cluster:
        config["main_process_ip"] = inputs.master_addr
        config["main_process_port"] = inputs.master_port
    if t.sharding == "fsdp-hybrid" and inputs.cluster:
        config["parallelism_config"] = {
            "parallelism_config_dp_replicate_size": inputs.nnodes,
            "parallelism_config_dp_shard_size": inputs.nproc_per_node,
        }
    return config


def render_accelerate(inputs: StackInputs) -> str:
    head = (f"# Accelerate (FSDP2) config of {inputs.hostname}, order {inputs.order}.\n"
            "# accelerate launch --config_file /etc/trainyard/accelerate.yaml train.py\n")
    return head + yaml.safe_dump(accelerate_config(inputs), sort_keys=True)
