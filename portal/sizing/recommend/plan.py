"""The Plan: one recommended configuration, typed and versioned (pure Python).

The recommender writes it; quotes and orders freeze ``plan.to_dict()`` as JSON; approvals,
the configurator and (next) the stack renderers read it back with ``Plan.from_dict()``. It
carries everything needed to re-estimate it (``plan_estimate``) and to render launch
configs: the model's name and the numbers of its spec, the training settings, the layout, the
server, and the per-GPU estimate.

Version policy (docs/sizing.md, "The stored plan"):
- ``schema_version == PLAN_SCHEMA_VERSION``: a whole plan; ``from_dict`` reads every field
  and refuses missing or mistyped ones with a ValueError a person can act on.
- no ``schema_version``: an *unversioned* plan (stored before plans were versioned, or the
  partial plan a reseller sends with a quote). It is kept as given once ``figure_problems``
  finds its figures well typed; pages show what it has; it cannot be re-estimated, so
  ``from_dict`` refuses it and says so.
- any other version: refused (this server cannot know what it means).
Keys other than the fields (display labels, the wizard's workload, rank) are ignored.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields
from decimal import Decimal
from typing import Any

from portal.catalog.pricing import to_decimal, usd_json
from portal.sizing.estimator import (
    ESTIMATOR_VERSION,
    Estimate,
    GPUSpec,
    Interconnect,
    ModelSpec,
    ParallelConfig,
    TrainingConfig,
    ZeroConfig,
    estimate,
)

PLAN_SCHEMA_VERSION = 1
MEMORY_TERMS = ("weights", "gradients", "optimizer_states", "activations", "logits_and_loss",
                "gathered_buffers", "framework_overhead", "transient")
# Figures of to_dict() that are not fields of their own (computed from fields).
DERIVED_NUMBERS = ("gpus", "per_gpu_total_bytes", "headroom_bytes")
RESIZE_HINT = "size the job again, or send the plan as POST /api/v1/recommendations returned it"


@dataclass(frozen=True)
class MemoryBreakdown:
    weights: int
    gradients: int
    optimizer_states: int
    activations: int
    logits_and_loss: int
    gathered_buffers: int
    framework_overhead: int
    total: int
    transient: int = 0  # peak temporaries (recompute, logits backward), part of total

    def to_dict(self) -> dict[str, int]:
        return {term: getattr(self, term) for term in MEMORY_TERMS}


@dataclass(frozen=True)
class StackConfig:
    slug: str  # stack option slug: ddp | fsdp | deepspeed
    name: str
    settings: tuple[tuple[str, Any], ...]  # key config values, in order

    def to_dict(self) -> dict[str, Any]:
        return {"slug": self.slug, "name": self.name, "settings": dict(self.settings)}


@dataclass(frozen=True)
class Plan:
    # What is trained: the model (name and spec) and the training settings.
    model: str
    model_spec: ModelSpec
    finetune: str
    precision: str
    optimizer: str
    attention: str
    lora_rank: int
    seq_len: int
    global_batch_tokens: int
    train_tokens: int
    # On what: the server size.
    sku: str
    sku_name: str
    gpu: str
    gpu_name: str
    gpus_per_node: int
    nodes: int
    interconnect: str
    network: str
    # How: the layout.
    strategy: str
    sharding: str  # estimator sharding value
    offload: str
    tp: int
    pp: int
    dp: int
    ep: int
    micro_batch: int
    grad_accum: int
    checkpointing: str
    # The estimate.
    memory: MemoryBreakdown
    gpu_memory_bytes: int
    usable_memory_bytes: int
    tokens_per_second: float
    step_seconds: float
    comm_seconds: float
    train_hours: float
    price_hourly_usd: Decimal
    price_total_usd: Decimal
    # The rest of the server: scratch, bucket, stack.
    nvme_option: str
    nvme_tb: float
    raid: str
    storage_provider: str
    storage_tb: float
    stack: StackConfig
    mfu: float = 0.0
    cpu_bytes_per_node: int = 0  # host RAM for offloaded state
    checkpoint_bytes: int = 0  # one full training state (weights, optimizer states, step)
    checkpoints_kept: int = 0  # full states the bucket keeps: storage_tb holds that many
    warnings: tuple[str, ...] = ()
    availability: str = "unknown"  # ready | on-request (more nodes than are ready) | unknown (no stock)
    # As billed (pricing.job_price): started hours over provisioning + training, or started months.
    billed_hours: int = 0
    billing: str = "hourly"  # hourly | monthly (the monthly rate was cheaper)
    price_per_month_usd: Decimal = Decimal("0")  # multi-week jobs: cost per month; 0 otherwise
    # The regime its stack runs, as the estimator knobs that differ from the fields above
    # (regimes.py): re-estimating the plan applies them. time_model "estimator": the plan was
    # timed by the estimator's own time model; "planning-mfu": by a stored MFU (older plans).
    training_regime: tuple[tuple[str, Any], ...] = ()
    parallel_regime: tuple[tuple[str, Any], ...] = ()
    represents: tuple[str, ...] = ()
    time_model: str = "planning-mfu"
    # the estimator model version that sized the plan (estimator.ESTIMATOR_VERSION; plans stored
    # before versions were recorded read as 1): re-estimating a plan of an older version uses
    # today's model, which may give other bytes and times (from_older_model says so)
    estimator_version: int = 1
    schema_version: int = PLAN_SCHEMA_VERSION

    @property
    def gpus(self) -> int:
        return self.gpus_per_node * self.nodes

    @property
    def headroom_bytes(self) -> int:
        return self.usable_memory_bytes - self.memory.total

    @property
    def from_older_model(self) -> bool:
        """Sized by an estimator model older than today's (its re-estimate may differ)."""
        return self.estimator_version < ESTIMATOR_VERSION

    def training_config(self) -> TrainingConfig:
        planning_mfu = self.mfu or None if self.time_model == "planning-mfu" else None
        return TrainingConfig(**{**_plan_training(self), "mfu": planning_mfu, **dict(self.training_regime)})

    def parallel_config(self) -> ParallelConfig:
        return ParallelConfig(**{**_plan_parallel(self), **dict(self.parallel_regime)})

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema_version": self.schema_version,
            "model": self.model, "model_spec": _spec_dict(self.model_spec),
            "finetune": self.finetune, "precision": self.precision, "optimizer": self.optimizer,
            "attention": self.attention, "lora_rank": self.lora_rank, "seq_len": self.seq_len,
            "global_batch_tokens": self.global_batch_tokens, "train_tokens": self.train_tokens,
            "sku": self.sku, "sku_name": self.sku_name, "gpu": self.gpu, "gpu_name": self.gpu_name,
            "gpus_per_node": self.gpus_per_node, "nodes": self.nodes, "gpus": self.gpus,
            "interconnect": self.interconnect, "network": self.network,
            "strategy": self.strategy, "sharding": self.sharding, "offload": self.offload,
            "tp": self.tp, "pp": self.pp, "dp": self.dp, "ep": self.ep,
            "micro_batch": self.micro_batch, "grad_accum": self.grad_accum,
            "checkpointing": self.checkpointing,
            "per_gpu_total_bytes": self.memory.total,
            "gpu_memory_bytes": self.gpu_memory_bytes,
            "usable_memory_bytes": self.usable_memory_bytes,
            "headroom_bytes": self.headroom_bytes,
            "memory_breakdown_bytes": self.memory.to_dict(),
            "tokens_per_second": round(self.tokens_per_second, 1),
            "step_seconds": round(self.step_seconds, 4),
            "comm_seconds": round(self.comm_seconds, 4),
            "cpu_bytes_per_node": self.cpu_bytes_per_node,
            "mfu": self.mfu,  # unrounded: re-estimating the plan times it with the same MFU
            "train_hours": round(self.train_hours, 3),
            "price_hourly_usd": usd_json(self.price_hourly_usd),
            "price_total_usd": usd_json(self.price_total_usd),
            "nvme_option": self.nvme_option, "nvme_tb": self.nvme_tb, "raid": self.raid,
            "storage_provider": self.storage_provider, "storage_tb": self.storage_tb,
            "checkpoint_bytes": self.checkpoint_bytes, "checkpoints_kept": self.checkpoints_kept,
            "stack": self.stack.slug, "stack_name": self.stack.name,
            "stack_settings": dict(self.stack.settings),
            "warnings": list(self.warnings), "availability": self.availability,
            "billed_hours": self.billed_hours, "billing": self.billing,
            "price_per_month_usd": usd_json(self.price_per_month_usd),
            "estimator_regime": {"version": self.estimator_version,
                                 "training": {k: _knob_json(v) for k, v in self.training_regime},
                                 "parallel": {k: _knob_json(v) for k, v in self.parallel_regime}},
            "represents": list(self.represents), "unmodelled": [],
            "time_model": self.time_model,
        }

    @classmethod
    def from_dict(cls, data: Any) -> Plan:
        """The plan that ``to_dict()`` wrote; ValueError naming what is missing or wrong."""
        if not isinstance(data, dict):
            raise ValueError("A sizing plan is a JSON object as POST /api/v1/recommendations returns it.")
        version = data.get("schema_version")
        if version is None:
            raise ValueError("This sizing plan has no schema_version: it was stored before plans were "
                             "versioned, or is a partial plan, so it cannot be re-estimated; "
                             + RESIZE_HINT + ".")
        if version != PLAN_SCHEMA_VERSION:
            raise ValueError(f"Sizing plan schema_version {version!r} is not one this server reads "
                             f"(it reads {PLAN_SCHEMA_VERSION}); {RESIZE_HINT}.")
        values = {}
        for f in fields(cls):
            if f.name in _NESTED:
                continue
            if f.name not in data:
                if f.name in _OPTIONAL:
                    continue
                raise ValueError(f"The sizing plan lacks {f.name}; {RESIZE_HINT}.")
            values[f.name] = _typed(f.name, f.type, data[f.name])
        values["model_spec"] = _spec_from(data.get("model_spec"))
        values["memory"] = _memory_from(data.get("memory_breakdown_bytes"), data.get("per_gpu_total_bytes"))
        values["stack"] = _stack_from(data)
        values["training_regime"], values["parallel_regime"] = regime_from(data.get("estimator_regime"))
        values["estimator_version"] = _version_from(data.get("estimator_regime"))
        plan = cls(**values)
        try:  # ValueError for values the estimator refuses
            plan.training_config(), plan.parallel_config()
        except TypeError as exc:  # a knob of a type its checks compare against
            raise ValueError(f"In the sizing plan, estimator_regime does not fit the estimator: {exc}."
                             ) from None
        return plan


_NESTED = ("model_spec", "memory", "stack", "training_regime", "parallel_regime",  # read from their own keys
           "estimator_version")
_OPTIONAL = ("mfu", "cpu_bytes_per_node", "checkpoint_bytes", "checkpoints_kept", "availability",
             "billed_hours", "billing", "price_per_month_usd", "represents", "time_model")
TIME_MODELS = ("estimator", "planning-mfu")


def _plan_training(plan: Plan) -> dict[str, Any]:
    """The TrainingConfig the plan's own fields say (before its stack's regime)."""
    return dict(precision=plan.precision, optimizer=plan.optimizer, micro_batch=plan.micro_batch,
                seq_len=plan.seq_len, grad_accum=plan.grad_accum, checkpointing=plan.checkpointing,
                attention=plan.attention, finetune=plan.finetune, lora_rank=plan.lora_rank)


def _plan_parallel(plan: Plan) -> dict[str, Any]:
    return dict(dp=plan.dp, sharding=plan.sharding, offload=plan.offload, tp=plan.tp, pp=plan.pp, ep=plan.ep)


def regime_overrides(training: TrainingConfig, parallel: ParallelConfig, *, checkpointing: str,
                     attention: str, precision: str
                     ) -> tuple[tuple[tuple[str, Any], ...], tuple[tuple[str, Any], ...]]:
    """(training, parallel) estimator knobs of a recommended layout that its plan's own fields
    (checkpointing, attention and precision as the plan states them) do not say: what
    re-estimating the plan must apply to give the same numbers."""
    plain_t = TrainingConfig(precision=precision, optimizer=training.optimizer,
                             micro_batch=training.micro_batch, seq_len=training.seq_len,
                             grad_accum=training.grad_accum, checkpointing=checkpointing, attention=attention,
                             finetune=training.finetune, lora_rank=training.lora_rank)
    plain_p = ParallelConfig(dp=parallel.dp, sharding=parallel.sharding, offload=parallel.offload,
                             tp=parallel.tp, pp=parallel.pp, ep=parallel.ep)
    t = tuple((f.name, getattr(training, f.name)) for f in fields(TrainingConfig)
              if f.name != "mfu" and getattr(training, f.name) != getattr(plain_t, f.name))
    p = tuple((f.name, getattr(parallel, f.name)) for f in fields(ParallelConfig)
              if getattr(parallel, f.name) != getattr(plain_p, f.name))
    return t, p


def _knob_json(value: Any) -> Any:
    """A knob as JSON holds it (the plan's dict is what quotes store): ZeroConfig as an object,
    tuples (lora_targets) as lists."""
    if isinstance(value, ZeroConfig):
        return {f.name: getattr(value, f.name) for f in fields(ZeroConfig)}
    if isinstance(value, tuple):
        return list(value)
    return value


# Settings the plan states in its own fields: its regime may not restate them otherwise
# (checkpointing, attention and precision are the regime's to override: the stack runs them so).
_PLAN_OWN = ("dp", "tp", "pp", "ep", "sharding", "offload", "micro_batch", "grad_accum", "seq_len",
             "optimizer", "finetune", "lora_rank")
_REGIME_FIELDS = {"training": {f.name: f for f in fields(TrainingConfig)},
                  "parallel": {f.name: f for f in fields(ParallelConfig)}}


def regime_from(data: Any) -> tuple[tuple[tuple[str, Any], ...], tuple[tuple[str, Any], ...]]:
    """The plan's estimator_regime as (training, parallel) knobs (absent in plans stored before it:
    none); ValueError naming a key or value the estimator would not take. Quotes check it and
    the stack renderers read their LoRA adapters from it."""
    if data is None:
        return (), ()
    if not isinstance(data, dict) or set(data) - {"training", "parallel", "version"}:
        raise ValueError("In the sizing plan, estimator_regime must be an object with training and parallel"
                         " (and the estimator version).")
    out = []
    for part in ("training", "parallel"):
        knobs = data.get(part) or {}
        if not isinstance(knobs, dict):
            raise ValueError(f"In the sizing plan, estimator_regime.{part} must be an object.")
        items = []
        for key, value in knobs.items():
            if value is None and key in ("lora_targets", "lora_dropout"):
                continue  # null is unset: the stack's defaults
            known = _REGIME_FIELDS[part].get(key)
            if known is None or key == "mfu" or key in _PLAN_OWN:
                raise ValueError(f"In the sizing plan, estimator_regime.{part}.{key} is not an estimator"
                                 " knob.")
            if key == "lora_targets":
                if not (isinstance(value, list) and value and all(isinstance(v, str) and v for v in value)):
                    raise ValueError("In the sizing plan, estimator_regime.training.lora_targets must be a"
                                     " list of layer names.")
                value = tuple(value)
            elif key == "lora_dropout":
                if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value < 1:
                    raise ValueError("In the sizing plan, estimator_regime.training.lora_dropout must be a"
                                     f" number from 0 to below 1, got {value!r}.")
            elif key == "zero":
                if not isinstance(value, dict):
                    raise ValueError("In the sizing plan, estimator_regime.parallel.zero must be an object.")
                try:
                    value = ZeroConfig(**value)
                except TypeError as exc:
                    raise ValueError(f"In the sizing plan, estimator_regime.parallel.zero: {exc}.") from None
            elif not _knob_type_ok(known.default, value):
                raise ValueError(f"In the sizing plan, estimator_regime.{part}.{key} has the wrong type:"
                                 f" {value!r}.")
            items.append((key, value))
        out.append(tuple(items))
    return out[0], out[1]


def _version_from(data: Any) -> int:
    """The estimator version of a stored regime (absent: 1, the model before versions were recorded)."""
    version = data.get("version", 1) if isinstance(data, dict) else 1
    if isinstance(version, bool) or not isinstance(version, int) or not 1 <= version <= ESTIMATOR_VERSION:
        raise ValueError(f"In the sizing plan, estimator_regime.version must be a whole number from 1 to"
                         f" {ESTIMATOR_VERSION}, got {version!r}; {RESIZE_HINT}.")
    return version


def _knob_type_ok(default: Any, value: Any) -> bool:
    if isinstance(default, bool):
        return isinstance(value, bool)
    if isinstance(default, int):
        return isinstance(value, int) and not isinstance(value, bool)
    if isinstance(default, str):
        return isinstance(value, str)
    if default is None:  # an optional number (dropout, …) or name: its checks say which
        return value is None or isinstance(value, (str, int, float)) and not isinstance(value, bool)
    if isinstance(default, float):
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    return False


def number_keys() -> tuple[str, ...]:
    """The plan's figures that pages compute with: every int or float field, and the derived ones."""
    return tuple(f.name for f in fields(Plan) if f.type in ("int", "float")) + DERIVED_NUMBERS


def is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def figure_problems(data: dict) -> list[str]:
    """The keys of a (possibly partial) plan whose values are not of the Plan's type for them."""
    bad = [key for key in number_keys() if data.get(key) is not None and not is_number(data[key])]
    breakdown = data.get("memory_breakdown_bytes")
    if breakdown is not None and not (isinstance(breakdown, dict)
                                      and all(is_number(v) for v in breakdown.values())):
        bad.append("memory_breakdown_bytes (each term)")
    return bad


def plan_estimate(plan: Plan, *, gpu: GPUSpec | None = None,
                  interconnect: Interconnect | None = None) -> Estimate:
    """Re-estimate a stored plan: the same model, settings and layout give the same per-GPU bytes."""
    return estimate(plan.model_spec, plan.training_config(), plan.parallel_config(), gpu=gpu,
                    interconnect=interconnect, train_tokens=plan.train_tokens)


def _typed(name: str, kind: str, value: Any) -> Any:
    if kind == "int":
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        if isinstance(value, bool) or not isinstance(value, int):
            raise ValueError(f"In the sizing plan, {name} must be a whole number, got {value!r}.")
    elif kind == "float":
        if not is_number(value):
            raise ValueError(f"In the sizing plan, {name} must be a number, got {value!r}.")
        value = float(value)
    elif kind == "Decimal":
        if not is_number(value):
            raise ValueError(f"In the sizing plan, {name} must be a number, got {value!r}.")
        value = to_decimal(value)
    elif kind == "str":
        if not isinstance(value, str):
            raise ValueError(f"In the sizing plan, {name} must be text, got {value!r}.")
    elif name in ("warnings", "represents"):
        if not isinstance(value, list | tuple) or not all(isinstance(w, str) for w in value):
            raise ValueError(f"In the sizing plan, {name} must be a list of sentences.")
        value = tuple(value)
    if name == "time_model" and value not in TIME_MODELS:
        raise ValueError(f"In the sizing plan, time_model must be one of {', '.join(TIME_MODELS)},"
                         f" got {value!r}.")
    return value


def _spec_dict(spec: ModelSpec) -> dict[str, Any]:
    return {f.name: getattr(spec, f.name) for f in fields(spec)}


def _spec_from(data: Any) -> ModelSpec:
    if not isinstance(data, dict):
        raise ValueError(f"The sizing plan lacks model_spec (the model's numbers); {RESIZE_HINT}.")
    known = {f.name for f in fields(ModelSpec)}
    try:
        return ModelSpec(**{k: v for k, v in data.items() if k in known})
    except TypeError as exc:  # a required number is missing
        raise ValueError(f"In the sizing plan, model_spec is incomplete ({exc}); {RESIZE_HINT}.") from None
    except ValueError as exc:
        raise ValueError(f"In the sizing plan, model_spec: {exc}.") from None


def _memory_from(breakdown: Any, total: Any) -> MemoryBreakdown:
    if not isinstance(breakdown, dict) or set(MEMORY_TERMS) - set(breakdown):
        raise ValueError(f"The sizing plan lacks memory_breakdown_bytes with {', '.join(MEMORY_TERMS)}; "
                         f"{RESIZE_HINT}.")
    terms = {term: _typed(f"memory_breakdown_bytes.{term}", "int", breakdown[term]) for term in MEMORY_TERMS}
    total = _typed("per_gpu_total_bytes", "int", total)
    if sum(terms.values()) != total:
        raise ValueError("In the sizing plan, per_gpu_total_bytes is not the sum of memory_breakdown_bytes.")
    return MemoryBreakdown(total=total, **terms)


def _stack_from(data: dict) -> StackConfig:
    slug = _typed("stack", "str", data.get("stack"))
    settings = data.get("stack_settings", {})
    if not isinstance(settings, dict):
        raise ValueError("In the sizing plan, stack_settings must be an object.")
    return StackConfig(slug=slug, name=_typed("stack_name", "str", data.get("stack_name", slug)),
                       settings=tuple(settings.items()))
