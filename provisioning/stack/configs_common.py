"""Facts about the model the framework configs share (pure)."""

from __future__ import annotations

# Transformers' decoder-layer class per Hugging Face model_type (ModelSpec.model_type, every
# type the estimator reads: estimator.models.MODEL_TYPES): what FSDP2 wraps as one unit.
LAYER_CLASSES = {"llama": "LlamaDecoderLayer", "mistral": "MistralDecoderLayer",
                 "qwen2": "Qwen2DecoderLayer", "qwen3": "Qwen3DecoderLayer",
                 "qwen3_moe": "Qwen3MoeDecoderLayer", "phi3": "Phi3DecoderLayer",
                 "gemma": "GemmaDecoderLayer", "gemma2": "Gemma2DecoderLayer",
                 "gemma3_text": "Gemma3DecoderLayer",
                 "mixtral": "MixtralDecoderLayer",
                 "gpt2": "GPT2Block", "bert": "BertLayer"}


def layer_class(model_type: str) -> str:
    """The decoder-layer class of a model_type (``stacks.model_type_of`` reads a plan's)."""
    try:
        return LAYER_CLASSES[model_type]
    except KeyError:
        raise ValueError(f"no decoder-layer class is known for model_type {model_type!r}; "
                         f"known: {', '.join(LAYER_CLASSES)}") from None
