"""Element types and their storage size in bytes."""

from __future__ import annotations

from enum import Enum

# NF4 with double quantisation (QLoRA, bitsandbytes): 4-bit codes, one 8-bit absmax per
# block of 64 weights, and one fp32 scale (+ fp32 offset) per 256 absmax values.
NF4_BLOCK = 64
NF4_SECOND_BLOCK = 256
NF4_DOUBLE_QUANT_BYTES = 0.5 + 1 / NF4_BLOCK + 4 / (NF4_BLOCK * NF4_SECOND_BLOCK)


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
