"""Element types and their storage size in bytes."""

from __future__ import annotations

from enum import Enum

# NF4 with double quantisation (QLoRA, bitsandbytes): 4-bit codes, one 8-bit absmax per
# block of 64 weights, and one fp32 scale (+ fp32 offset) per 256 absmax values.
NF4_BLOCK = 64
NF4_SECOND_BLOCK = 256
NF4_PACKED_BYTES = 0.5  # two 4-bit codes per byte: the Params4bit data FSDP / ZeRO-3 can shard
# the quantisation state (absmax codes and their fp32 scales): bitsandbytes keeps it on the module
# (Linear4bit.quant_state), not in a parameter, so no sharding strategy splits it
NF4_QUANT_STATE_BYTES = 1 / NF4_BLOCK + 4 / (NF4_BLOCK * NF4_SECOND_BLOCK)
# without double quantisation (bitsandbytes' compress_statistics=False: Hugging Face's
# bnb_4bit_use_double_quant=False, Lightning's "nf4" mode) one fp32 absmax per block of 64
NF4_PLAIN_STATE_BYTES = 4 / NF4_BLOCK
NF4_DOUBLE_QUANT_BYTES = NF4_PACKED_BYTES + NF4_QUANT_STATE_BYTES


class DType(Enum):
    FP32 = ("fp32", 4.0)
    BF16 = ("bf16", 2.0)
    FP16 = ("fp16", 2.0)
    FP8 = ("fp8", 1.0)
    INT8 = ("int8", 1.0)
    INT64 = ("int64", 8.0)
    NF4 = ("nf4", NF4_DOUBLE_QUANT_BYTES)

    def __init__(self, label: str, nbytes: float) -> None:
        self.label = label
        self.nbytes = nbytes
