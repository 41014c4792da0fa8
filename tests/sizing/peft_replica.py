"""PEFT's LoRA and DoRA linears as they run in training, for the measured-activation tests (torch
only; PEFT itself is not installed here). Read from huggingface/peft at 5d602fd:
tuners/lora/layer.py (Linear.forward, _cast_input_dtype), tuners/lora/variants.py
(DoraLinearVariant.forward) and tuners/lora/dora.py (DoraLinearLayer.forward, get_lora_weight,
get_weight_norm). One adapter, scaling 2; LoRA dropout optional (DoRA then runs the frozen matmul
again on the dropped input)."""

from __future__ import annotations

import torch
from torch import nn

SCALING = 2.0


class LoraLinear(nn.Module):
    def __init__(self, base: nn.Linear, r: int, dropout: float = 0.0):
        super().__init__()
        self.base_layer = base
        self.lora_A = nn.Linear(base.in_features, r, bias=False, dtype=base.weight.dtype)
        self.lora_B = nn.Linear(r, base.out_features, bias=False, dtype=base.weight.dtype)
        self.dropout = nn.Dropout(dropout) if dropout else nn.Identity()

    def forward(self, x):
        result = self.base_layer(x)
        x = x.to(self.lora_A.weight.dtype)  # _cast_input_dtype: a half input to fp32 adapters
        return (result + self.adapter(x, result)).to(result.dtype)

    def adapter(self, x, result):
        return self.lora_B(self.lora_A(self.dropout(x))) * SCALING


class DoraLinear(LoraLinear):
    """use_dora: the magnitude vector scales the adapted weight's column norms, worked out anew at
    every call from W + s * BA, which it runs through the adapter as an identity input."""

    def __init__(self, base: nn.Linear, r: int, dropout: float = 0.0):
        super().__init__(base, r, dropout)
        with torch.no_grad():
            weight = base.weight + SCALING * (self.lora_B.weight @ self.lora_A.weight)
            self.magnitude = nn.Parameter(torch.linalg.norm(weight, dim=1).to(base.weight.dtype))

    def adapter(self, x, result):
        if not isinstance(self.dropout, nn.Identity):  # variants.py: no base result for a dropped input
            x, result = self.dropout(x), None
        eye = torch.eye(self.lora_A.weight.shape[1], device=x.device, dtype=self.lora_A.weight.dtype)
        lora_weight = self.lora_B(self.lora_A(eye)).T.to(x.dtype)
        base_weight = self.base_layer.weight.to(x.dtype)
        weight = base_weight + SCALING * lora_weight.detach()  # get_weight_norm
        weight_norm = torch.linalg.norm(weight, dim=1).to(weight.dtype).detach()
        mag_norm_scale = (self.magnitude / weight_norm).view(1, -1)
        lora_result = self.lora_B(self.lora_A(x))
        if result is None:
            result = nn.functional.linear(x, base_weight)
        return (mag_norm_scale - 1) * result + mag_norm_scale * lora_result * SCALING

