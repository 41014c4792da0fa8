"""Inputs (workload, goal, search options) and outputs (plans, recommendation)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from portal.catalog.pricing import to_decimal, usd_json
from portal.sizing.estimator.config import (  # noqa: F401  (re-exported)
    ATTENTION,
    CHECKPOINTING,
    FINETUNE,
    LIMITS,
    PRECISIONS,
    check_dora_finetune,
    limit_text,
    require_whole,
)
from portal.sizing.estimator.models import ModelSpec

from .plan import Plan
from .strategies import get_strategy

GOALS = ("fastest", "cheapest", "deadline", "budget")
FINETUNES = FINETUNE

# Search space (documented in docs/sizing.md). Node counts are powers of two so that the
# global batch splits evenly; micro-batches are sequences per GPU per forward pass.
NODE_COUNTS = (1, 2, 4, 8, 16, 32)
MICRO_BATCHES = (1, 2, 4, 8, 16, 32, 64)
TP_SIZES = (1, 2, 4, 8)
PP_SIZES = (1, 2, 4, 8, 16)
# Far beyond any training run (Llama 3: 15e12 tokens); above it the arithmetic leaves floats.
MAX_TOKENS = 10**18


def _within(label: str, value) -> None:
    """A finite number within ``LIMITS[label]``, else ValueError naming the field and the range."""
    low, high = LIMITS[label]
    if (isinstance(value, bool) or not isinstance(value, int | float | Decimal) or not math.isfinite(value)
            or not low <= value <= high):
        raise ValueError(f"{label} must be a number {limit_text(low, high)}, got {value!r}")


@dataclass(frozen=True)
class Workload:
    """What the customer wants to train.

    model: a preset name (``llama-3.1-8b``) or an estimator ``ModelSpec``.
    train_tokens: tokens to train on; when 0, ``epochs * dataset_tokens``.
    """

    model: str | ModelSpec
    dataset_tokens: int
    dataset_bytes: int = 0
    dataset_files: int = 1
    finetune: str = "full"
    precision: str = "bf16-mixed"
    optimizer: str = "adamw"
    attention: str = "sdpa"
    seq_len: int = 4096
    global_batch_tokens: int = 4 * 2**20
    epochs: float = 1.0
    train_tokens: int = 0
    lora_rank: int = 16
    use_dora: bool = False  # PEFT's DoRA on the LoRA adapters (LoraConfig.use_dora)

    def __post_init__(self) -> None:
        if not isinstance(self.model, str | ModelSpec) or not self.model:
            raise ValueError("model must be a preset name (e.g. 'llama-3.1-8b') or a ModelSpec")
        if self.finetune not in FINETUNES:
            raise ValueError(f"finetune={self.finetune!r} is not supported;"
                             f" use one of {', '.join(FINETUNES)}")
        if self.precision not in PRECISIONS:
            raise ValueError(f"precision={self.precision!r} is not supported;"
                             f" use one of {', '.join(PRECISIONS)}")
        if self.attention not in ATTENTION:
            raise ValueError(f"attention={self.attention!r} is not supported;"
                             f" use one of {', '.join(ATTENTION)}")
        for label in ("seq_len", "global_batch_tokens", "dataset_files"):
            require_whole(label, getattr(self, label))
        for label in ("dataset_tokens", "dataset_bytes", "train_tokens", "lora_rank"):
            value = getattr(self, label)
            if not isinstance(value, int) or value < 0:
                raise ValueError(f"{label} must be a whole number >= 0, got {value!r}")
        if self.finetune != "full":
            require_whole("lora_rank", self.lora_rank)
        check_dora_finetune(self.use_dora, self.finetune)
        if self.global_batch_tokens % self.seq_len:
            raise ValueError(
                f"global_batch_tokens={self.global_batch_tokens} is not a multiple of seq_len={self.seq_len};"
                f" use e.g. {self.seq_len * max(1, round(self.global_batch_tokens / self.seq_len))}"
            )
        _within("epochs", self.epochs)
        for label in ("dataset_tokens", "dataset_bytes", "train_tokens"):
            if getattr(self, label) > MAX_TOKENS:
                raise ValueError(f"{label} must be at most {MAX_TOKENS:.0e}, got {getattr(self, label)!r}")
        if not self.train_tokens and self.epochs * self.dataset_tokens > MAX_TOKENS:
            raise ValueError(f"epochs x dataset_tokens is more than {MAX_TOKENS:.0e} tokens to train;"
                             " check the epochs and the dataset size")
        if self.tokens_to_train <= 0:
            raise ValueError("nothing to train: give dataset_tokens with epochs > 0, or train_tokens")

    @property
    def tokens_to_train(self) -> int:
        return self.train_tokens or int(self.epochs * self.dataset_tokens)

    @property
    def global_batch_sequences(self) -> int:
        return self.global_batch_tokens // self.seq_len

    @property
    def model_name(self) -> str:
        return self.model if isinstance(self.model, str) else self.model.name


@dataclass(frozen=True)
class Goal:
    """fastest | cheapest | deadline (least cost within deadline_hours) | budget (fastest within
    budget_usd)."""

    kind: str = "fastest"
    deadline_hours: float | None = None
    budget_usd: Decimal | None = None  # a number given is read as written

    def __post_init__(self) -> None:
        if self.kind not in GOALS:
            raise ValueError(f"goal={self.kind!r} is not supported; use one of {', '.join(GOALS)}")
        if self.kind == "deadline" and not (self.deadline_hours and self.deadline_hours > 0):
            raise ValueError("the 'deadline' goal needs deadline_hours > 0 (finish within how many hours?)")
        if self.kind == "budget" and not (self.budget_usd and self.budget_usd > 0):
            raise ValueError("the 'budget' goal needs budget_usd > 0 (how much may the job cost?)")
        for label in ("deadline_hours", "budget_usd"):
            if getattr(self, label) is not None:
                _within(label, getattr(self, label))
        if self.budget_usd is not None:
            object.__setattr__(self, "budget_usd", to_decimal(self.budget_usd))


@dataclass(frozen=True)
class SearchOptions:
    node_counts: tuple[int, ...] = NODE_COUNTS
    micro_batches: tuple[int, ...] = MICRO_BATCHES
    tp_sizes: tuple[int, ...] = TP_SIZES
    pp_sizes: tuple[int, ...] = PP_SIZES
    checkpointing: tuple[str, ...] = CHECKPOINTING
    strategies: tuple[str, ...] = ()  # () = every strategy in search.STRATEGIES
    top_n: int = 5

    def __post_init__(self) -> None:
        for label in ("node_counts", "micro_batches", "tp_sizes", "pp_sizes"):
            values = getattr(self, label)
            if not values or any(not isinstance(v, int) or v < 1 for v in values):
                raise ValueError(f"{label} must be a non-empty tuple of whole numbers >= 1")
        bad = [c for c in self.checkpointing if c not in CHECKPOINTING]
        if bad or not self.checkpointing:
            raise ValueError(f"checkpointing must be chosen from {CHECKPOINTING}")
        if self.top_n < 1:
            raise ValueError("top_n must be >= 1")
        for name in self.strategies:
            get_strategy(name)  # ValueError naming the known strategies


@dataclass(frozen=True)
class Point:
    """One feasible configuration, for the cost-vs-time chart."""

    sku: str
    gpu: str
    nodes: int
    strategy: str
    tp: int
    pp: int
    micro_batch: int
    checkpointing: str
    train_hours: float
    price_total_usd: Decimal
    per_gpu_total_bytes: int
    pareto: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {
            "sku": self.sku, "gpu": self.gpu, "nodes": self.nodes, "strategy": self.strategy,
            "tp": self.tp, "pp": self.pp, "micro_batch": self.micro_batch,
            "checkpointing": self.checkpointing, "train_hours": round(self.train_hours, 3),
            "price_total_usd": usd_json(self.price_total_usd),
            "per_gpu_total_bytes": self.per_gpu_total_bytes, "pareto": self.pareto,
        }


@dataclass(frozen=True)
class Rejection:
    """A server size that cannot run the job: its best (smallest-memory) attempt."""

    sku: str
    nodes: int
    gpus: int
    gpu_name: str
    needed_bytes: int
    usable_bytes: int
    strategy: str
    message: str

    def to_dict(self) -> dict[str, Any]:
        return {
            "sku": self.sku, "nodes": self.nodes, "gpus": self.gpus, "needed_bytes": self.needed_bytes,
            "usable_bytes": self.usable_bytes, "strategy": self.strategy, "message": self.message,
        }


@dataclass(frozen=True)
class DataAdvice:
    format: str  # "as-is" | "webdataset"
    shard_count: int
    shard_bytes: int
    dataloader_workers: int
    dataset_arrival_hours: float
    message: str

    def to_dict(self) -> dict[str, Any]:
        return {
            "format": self.format, "shard_count": self.shard_count, "shard_bytes": self.shard_bytes,
            "dataloader_workers": self.dataloader_workers,
            "dataset_arrival_hours": round(self.dataset_arrival_hours, 2), "message": self.message,
        }


@dataclass(frozen=True)
class Recommendation:
    goal: Goal
    goal_met: bool
    plans: tuple[Plan, ...]
    explanations: tuple[str, ...]
    alternatives: tuple[str, ...]
    rejections: tuple[Rejection, ...]
    points: tuple[Point, ...]
    data: DataAdvice | None
    warnings: tuple[str, ...] = ()
    other_gpus: tuple[Point, ...] = ()  # the same job's best on each other GPU family, cheapest first
    candidates_evaluated: int = 0
    estimator_calls: int = 0
    stats: dict[str, int] = field(default_factory=dict, compare=False)

    @property
    def best(self) -> Plan | None:
        return self.plans[0] if self.plans else None

    def to_dict(self) -> dict[str, Any]:
        return {
            "goal": {"kind": self.goal.kind, "deadline_hours": self.goal.deadline_hours,
                     "budget_usd": None if self.goal.budget_usd is None else usd_json(self.goal.budget_usd)},
            "goal_met": self.goal_met,
            "plans": [p.to_dict() for p in self.plans],
            "explanations": list(self.explanations),
            "alternatives": list(self.alternatives),
            "rejections": [r.to_dict() for r in self.rejections],
            "points": [p.to_dict() for p in self.points],
            "data": self.data.to_dict() if self.data else None,
            "warnings": list(self.warnings),
            "other_gpus": [p.to_dict() for p in self.other_gpus],
            "candidates_evaluated": self.candidates_evaluated,
            "estimator_calls": self.estimator_calls,
        }
