"""What a training stack can run: the vocabulary of StackOption's capabilities (pure Python).

The catalog model validates against it and the pure recommender (through
``portal.sizing.recommend.catalog.StackOptionSpec``) reads the same names, so a stack declares
its capabilities once, in the catalog.
"""

from __future__ import annotations

import re

# Data-parallel kinds, by how the stack shards model state over data-parallel ranks.
DATA_PARALLEL_KINDS: dict[str, str] = {
    "ddp": "DDP (replicated)",
    "zero1": "ZeRO-1",
    "zero2": "ZeRO-2",
    "zero3": "ZeRO-3",
    "fsdp2-full-shard": "FSDP2 full shard",
    "fsdp2-hybrid-shard": "FSDP2 hybrid shard (HSDP)",
}
# Boolean capabilities: field name -> what a person reads.
FEATURES: dict[str, str] = {
    "tensor_parallel": "tensor parallelism",
    "sequence_parallel": "sequence parallelism",
    "pipeline_parallel": "pipeline parallelism",
    "context_parallel": "context parallelism",
    "cpu_offload": "CPU offload",
    "lora": "LoRA",
    "qlora": "QLoRA (4-bit base + adapters)",
    "fp8": "fp8 training",
    "op_level_checkpointing": "op-level selective activation checkpointing",
}
# Model families (architectures) a stack can build, by how its code constructs the model. The
# Hugging Face stacks (DDP, Accelerate, DeepSpeed) load any Transformers architecture; torchtitan
# 0.2.2 builds only its own model definitions (its registry: llama3, llama4, qwen3, deepseek_v3,
# gpt_oss, flux), of which this portal sizes llama3: the Llama 3.1 8B / 70B / 405B shapes.
# A plan's family comes from its model (portal.sizing.recommend.stacks.model_family).
MODEL_FAMILIES: dict[str, str] = {
    "llama3": "Llama 3.1 (8B / 70B / 405B)",
    "llama": "Llama-architecture (Llama 2, other sizes)",
    "mistral": "Mistral",
    "mixtral": "Mixtral (mixture of experts)",
    "qwen2": "Qwen2 / Qwen2.5",
    "qwen3": "Qwen3 (dense)",
    "qwen3_moe": "Qwen3-MoE (mixture of experts)",
    "phi3": "Phi-3 / Phi-4",
    "gemma": "Gemma (2B / 7B)",
    "gemma2": "Gemma 2",
    "gemma3_text": "Gemma 3 (text)",
    "gpt2": "GPT-2",
    "bert": "BERT",
}
# A pinned requirement as pip reads it: name[extras]==version.
PINNED = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*(\[[A-Za-z0-9,._-]+\])?==[0-9][A-Za-z0-9.+!-]*$")


def data_parallel_problems(value) -> list[str]:
    if not isinstance(value, list | tuple) or not all(isinstance(v, str) for v in value):
        return ["data-parallel kinds must be a list of names"]
    unknown = [v for v in value if v not in DATA_PARALLEL_KINDS]
    if unknown:
        return [f"unknown data-parallel kind {v!r}; use one of {', '.join(DATA_PARALLEL_KINDS)}"
                for v in unknown]
    return []


def model_family_problems(value) -> list[str]:
    if not isinstance(value, list | tuple) or not all(isinstance(v, str) for v in value):
        return ["model families must be a list of names"]
    return [f"unknown model family {v!r}; use one of {', '.join(MODEL_FAMILIES)}"
            for v in value if v not in MODEL_FAMILIES]


def package_problems(value) -> list[str]:
    if not isinstance(value, list | tuple):
        return ["packages must be a list of pinned pip requirements, e.g. [\"torch==2.13.0\"]"]
    return [f"{p!r} is not a pinned requirement (name==version)" for p in value
            if not isinstance(p, str) or not PINNED.match(p)]
