"""Facts about the model the framework configs share (pure)."""

from __future__ import annotations

# Transformers' decoder-layer class per model name prefix: what FSDP2 wraps as one unit.
LAYER_CLASSES = (("mixtral", "MixtralDecoderLayer"), ("mistral", "MistralDecoderLayer"),
                 ("qwen2", "Qwen2DecoderLayer"), ("qwen3", "Qwen3DecoderLayer"),
                 ("llama", "LlamaDecoderLayer"), ("gemma", "GemmaDecoderLayer"),
                 ("gpt2", "GPT2Block"), ("bert", "BertLayer"))
FAMILY_LAYER_CLASSES = {"llama": "LlamaDecoderLayer", "gpt2": "GPT2Block", "bert": "BertLayer"}


def layer_class(model: str, family: str) -> str:
    name = model.lower()
    for prefix, cls in LAYER_CLASSES:
        if name.startswith(prefix):
            return cls
    return FAMILY_LAYER_CLASSES.get(family, "LlamaDecoderLayer")
