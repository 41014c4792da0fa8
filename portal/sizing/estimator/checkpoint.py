"""Checkpoint sizes on disk, for NVMe and bucket sizing."""

from __future__ import annotations

from functools import lru_cache

from .config import TrainingConfig
from .memory import Placement, _optimizer_elem, _trainable, _trainable_key, trainable_elems
from .models import ModelSpec, arch_scale


def model_only_bytes(model: ModelSpec, training: TrainingConfig) -> int:
    """Weights as exported (save_pretrained): fp32 for fp32 training, else 16-bit.
    LoRA/QLoRA: the adapter only (fp32 tensors are saved as trained: 4 B, half 2 B)."""
    if training.finetune != "full":
        n = trainable_elems(model, training)
        return n * (4 if training.precision == "fp32" else 2)
    return model.params.total * (4 if training.precision == "fp32" else 2)


def full_state_bytes(model: ModelSpec, training: TrainingConfig, p: Placement) -> int:
    """Everything needed to resume: trainable weights in their training dtype, fp32 master
    copy and optimizer states (summed over all ranks), plus frozen weights are NOT included
    (they are re-read from the base model)."""
    return _full_state_bytes(model, *_trainable_key(training), training.optimizer_kind, p.weight_bytes,
                             p.state_bytes, p.master_bytes)


@lru_cache(maxsize=1024)
def _full_state_bytes(model: ModelSpec, full: bool, targets: tuple[str, ...], rank: int, dora: bool,
                      optimizer: str, weight_bytes: float, state_bytes: float, master_bytes: float) -> int:
    total = 0.0
    for t in _trainable(model, full, targets, rank, dora):
        total += t.total * (weight_bytes + _optimizer_elem(t, optimizer, state_bytes, master_bytes))
    return int(total * arch_scale(model))
