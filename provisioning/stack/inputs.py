"""What the stack renderers read: the training settings from the order's plan (with documented
defaults for an empty or partial plan) and the node's place in the cluster. Pure: the renderers
take a ``StackInputs`` and return text; ``stack_inputs()`` builds one from the order, node and
cluster rows (read by attribute only, so this module imports no model).

Defaults (an API quote may carry no plan, or only some keys):

======================  ============================  =========================================
setting                 default                       from the plan key
======================  ============================  =========================================
micro_batch             1                             ``micro_batch``
grad_accum              1                             ``grad_accum``
sharding                per stack: ddp ``none``,       ``sharding``
                        fsdp ``fsdp-full-shard``,
                        deepspeed ``zero2``,
                        torchtitan ``fsdp-full-shard``
offload                 ``none``                      ``offload``
checkpointing           ``selective``                 ``checkpointing``
attention               ``sdpa``                      ``attention``
precision               ``bf16-mixed``                ``precision``
tp / pp / cp            1 / 1 / 1                     ``tp`` / ``pp`` / ``cp`` (top level, as
                                                      the stack check reads them)
seq_len                 2048                          ``seq_len``
finetune / lora_rank    ``full`` / 16                 ``finetune`` / ``lora_rank``
model                   ``llama-3.1-8b``              ``model`` (+ ``model_spec``)
======================  ============================  =========================================

The batch comes from one place (``batch_layout``): the data-parallel size is the ordered world
(GPUs per node x nodes) over tp x pp x cp, which must divide it; one optimizer step sees
micro_batch x grad_accum x dp sequences. A plan that gives ``global_batch_tokens`` without
``grad_accum`` gets the accumulation that makes that batch; one whose numbers disagree is refused.
Training steps are ``train_tokens`` over that batch's tokens, so the configs train what the plan
says. ``stack_settings`` are display values and are not read.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from portal.sizing.catalog_data import catalog_from_seed
from portal.sizing.estimator.config import (
    ATTENTION,
    CHECKPOINTING_POLICIES,
    FINETUNE,
    OFFLOAD,
    PRECISIONS,
    SHARDING,
    WEIGHT_SHARDING,
)
from portal.sizing.recommend.plan import regime_from
from portal.sizing.recommend.regimes import LORA_DROPOUT
from portal.sizing.recommend.stacks import (
    Needs,
    llama3_flavour,
    missing,
    model_family,
    model_type_of,
    preset_spec,
    rendered_checkpointing,
)
from provisioning.drivers import is_test_host, node_options, options_schema
from provisioning.stack.packages import CONSTRAINTS, stack_packages, tracker_packages

MASTER_PORT = 29500
TEST_HOST_NPROC = 2
DEFAULT_MODEL = "llama-3.1-8b"
DEFAULT_SHARDING = {"ddp": "none", "fsdp": "fsdp-full-shard", "deepspeed": "zero2",
                    "torchtitan": "fsdp-full-shard"}
STRATEGIES = tuple(DEFAULT_SHARDING)
SINGLE_NODE_MASTER = "127.0.0.1"


@dataclass(frozen=True)
class TrainingSettings:
    """The plan's training layout, every value checked and defaulted."""

    model: str = DEFAULT_MODEL
    family: str = "llama"  # the estimator's family (llama | gpt2 | bert): LoRA targets, task
    model_type: str = "llama"  # Hugging Face model_type (stacks.model_type_of): decoder-layer class
    architecture: str | None = "llama3"  # MODEL_FAMILIES key (stacks.model_family); None: unknown
    titan_flavour: str | None = "8B"  # torchtitan llama3 flavour of exactly this architecture
    micro_batch: int = 1
    grad_accum: int = 1
    sharding: str = "none"
    offload: str = "none"
    checkpointing: str = "selective"
    attention: str = "sdpa"
    precision: str = "bf16-mixed"
    finetune: str = "full"
    lora_rank: int = 16
    # the adapters the plan was sized with (its estimator_regime); empty: the stack's for the family
    lora_targets: tuple[str, ...] = ()
    lora_dropout: float = LORA_DROPOUT
    use_dora: bool = False  # PEFT's DoRA, as the plan was sized (its estimator_regime)
    tp: int = 1
    pp: int = 1
    cp: int = 1
    seq_len: int = 2048
    hidden_size: int = 4096  # sizes DeepSpeed's buckets
    dp: int = 1  # data-parallel ranks: the ordered world over tp x pp x cp
    train_steps: int = 0  # optimizer steps to see the plan's tokens; 0: not in the plan
    step_seconds: float = 0.0  # the plan's estimated optimizer step; 0: not in the plan
    defaulted: tuple[str, ...] = ()  # the settings the plan did not give

    @property
    def checkpoint_every_steps(self) -> int:
        """Every stack saves on this many steps (``checkpoint_interval``)."""
        return checkpoint_interval(step_seconds=self.step_seconds, train_steps=self.train_steps)

    @property
    def global_batch(self) -> int:
        """Sequences per optimizer step (every config renders this one number)."""
        return self.micro_batch * self.grad_accum * self.dp

    @property
    def activation_checkpointing(self) -> str:
        """none | full | op: what the Hugging Face stacks' configs render (stacks.rendered_checkpointing;
        torchtitan renders its own, with its op-level SAC for selective)."""
        return rendered_checkpointing(self.checkpointing, self.attention)

    @property
    def shards_params(self) -> bool:
        return self.sharding in WEIGHT_SHARDING

    @property
    def bf16(self) -> bool:
        return self.precision in ("bf16-mixed", "bf16", "fp8")

    @property
    def fp8(self) -> bool:
        return self.precision == "fp8"

    @property
    def offload_optimizer(self) -> bool:
        return self.offload in ("optimizer", "optimizer+params")

    @property
    def offload_params(self) -> bool:
        return self.offload == "optimizer+params"


def _whole(plan: dict, key: str) -> int | None:
    value = plan.get(key)
    if value is None:
        return None
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"In the order's plan, {key} must be a whole number of at least 1, "
                         f"got {value!r}.")
    return value


def _choice(plan: dict, key: str, allowed: tuple[str, ...]) -> str | None:
    value = plan.get(key)
    if value is None:
        return None
    if value not in allowed:
        raise ValueError(f"In the order's plan, {key} must be one of {', '.join(allowed)}, "
                         f"got {value!r}.")
    return value


# Checkpoints on a time basis taken from the plan: about every CHECKPOINT_EVERY_S of estimated
# training (a crash loses at most that much), and at least MIN_CHECKPOINTS in a run, so a run
# shorter than three of those still leaves checkpoints for the sync timer to copy. The count kept
# on the node (torchtitan's keep_latest_k) is the bucket's kept versions (STORAGE_KEEP_VERSIONS).
CHECKPOINT_EVERY_S = 45 * 60
MIN_CHECKPOINTS = 3
CHECKPOINTS_KEPT = 3  # the newest checkpoints kept on a node; STORAGE_KEEP_VERSIONS's default
CHECKPOINT_EVERY_STEPS_UNKNOWN = 500  # a plan without a step time and a step count


def checkpoint_interval(*, step_seconds: float, train_steps: int) -> int:
    """Optimizer steps between two checkpoints, at least 1."""
    every = (max(1, round(CHECKPOINT_EVERY_S / step_seconds)) if step_seconds > 0
             else CHECKPOINT_EVERY_STEPS_UNKNOWN)
    if train_steps:
        every = min(every, max(1, train_steps // MIN_CHECKPOINTS))
    return every


def training_settings(plan: Any, strategy: str, *, world_size: int = 1) -> TrainingSettings:
    """The settings of a (possibly empty or partial) plan dict for an ordered world of
    ``world_size`` GPUs; ValueError for a wrong value or a layout that does not fit the world."""
    plan = plan if isinstance(plan, dict) else {}
    spec = plan.get("model_spec") if isinstance(plan.get("model_spec"), dict) else {}
    base = TrainingSettings(sharding=DEFAULT_SHARDING.get(strategy, "none"))
    given: dict[str, Any] = {
        "micro_batch": _whole(plan, "micro_batch"), "grad_accum": _whole(plan, "grad_accum"),
        "tp": _whole(plan, "tp"), "pp": _whole(plan, "pp"), "cp": _whole(plan, "cp"),
        "seq_len": _whole(plan, "seq_len"), "hidden_size": _whole(spec, "hidden_size"),
        "sharding": _choice(plan, "sharding", SHARDING), "offload": _choice(plan, "offload", OFFLOAD),
        "checkpointing": _choice(plan, "checkpointing", CHECKPOINTING_POLICIES),
        "attention": _choice(plan, "attention", ATTENTION),
        "precision": _choice(plan, "precision", PRECISIONS),
        "finetune": _choice(plan, "finetune", FINETUNE), "lora_rank": _whole(plan, "lora_rank"),
        "model": plan.get("model") if isinstance(plan.get("model"), str) and plan.get("model") else None,
        "family": spec.get("family") if isinstance(spec.get("family"), str) else None,
    }
    defaulted = tuple(k for k, v in given.items() if v is None)
    values = {k: v for k, v in given.items() if v is not None}
    model = values.get("model", DEFAULT_MODEL)
    if "family" not in values:  # a plan stored without its spec: the preset's, by the model's name
        values["family"] = (preset_spec(model) or {}).get("family") or "llama"
    # the spec's model_type; a plan stored before specs carried one: model_type_of's fallback
    values["model_type"] = model_type_of(model, {**spec, "family": values["family"]}) or base.model_type
    spec_or_preset = spec if spec.get("family") else None
    values["architecture"] = model_family(model, spec_or_preset)
    values["titan_flavour"] = _titan_flavour(model, spec_or_preset)
    merged = {**base.__dict__, **values}
    merged.update(batch_layout(plan, merged, world_size=world_size))
    merged["step_seconds"] = _positive_float(plan, "step_seconds") or 0.0
    merged.update(_sized_adapters(plan))
    return TrainingSettings(**{**merged, "defaulted": defaulted})


def _sized_adapters(plan: dict) -> dict[str, Any]:
    """The LoRA targets, dropout and DoRA the plan's estimate counted (``estimator_regime.training``),
    so the adapters deployed are the ones sized; none given: the stack's defaults."""
    training, _ = regime_from(plan.get("estimator_regime"))
    return {key: float(value) if key == "lora_dropout" else value
            for key, value in training if key in ("lora_targets", "lora_dropout", "use_dora")}


def _titan_flavour(model: str, spec: dict | None) -> str | None:
    spec = spec or preset_spec(model)
    return llama3_flavour(spec) if spec else None


def batch_layout(plan: dict, settings: dict, *, world_size: int) -> dict[str, int]:
    """dp, grad_accum and train_steps from one place (the module's docstring says how)."""
    tp, pp, cp = settings["tp"], settings["pp"], settings["cp"]
    model_parallel = tp * pp * cp
    if world_size % model_parallel:
        raise ValueError(f"tp {tp} x pp {pp} x cp {cp} = {model_parallel} does not divide the "
                         f"order's {world_size} GPU(s): no data-parallel layout fits. Size the "
                         f"job again for this server, or order a server whose GPU count it divides.")
    dp = world_size // model_parallel
    micro, seq = settings["micro_batch"], settings["seq_len"]
    accum = settings["grad_accum"]
    tokens = _positive_int(plan, "global_batch_tokens")
    if tokens is not None:
        per_accum = micro * dp * seq
        if plan.get("grad_accum") is None and tokens % per_accum == 0:
            accum = tokens // per_accum
        elif accum * per_accum != tokens:
            raise ValueError(
                f"the plan's global_batch_tokens {tokens:,} is not micro_batch {micro} x "
                f"grad_accum {accum} x data-parallel {dp} x seq_len {seq} = {accum * per_accum:,}"
                f" on this order's {world_size} GPU(s): the plan was sized for another layout. "
                f"Size the job again for this server.")
    train_tokens = _positive_int(plan, "train_tokens")
    steps = math.ceil(train_tokens / (micro * accum * dp * seq)) if train_tokens else 0
    return {"dp": dp, "grad_accum": accum, "train_steps": steps}


def _positive_float(plan: dict, key: str) -> float | None:
    value = plan.get(key)
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if math.isfinite(value) and value > 0 else None


def _positive_int(plan: dict, key: str) -> int | None:
    value = plan.get(key)
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


@dataclass(frozen=True)
class NodeFacts:
    """What the stack step discovered on the node before rendering (``discover.py``)."""

    socket_ifname: str = ""
    ib_hcas: tuple[str, ...] = ()

    def to_dict(self) -> dict:
        return {"socket_ifname": self.socket_ifname, "ib_hcas": list(self.ib_hcas)}

    @classmethod
    def from_dict(cls, data: Any) -> NodeFacts:
        data = data if isinstance(data, dict) else {}
        return cls(socket_ifname=str(data.get("socket_ifname") or ""),
                   ib_hcas=tuple(str(h) for h in data.get("ib_hcas") or ()))


@dataclass(frozen=True)
class StackInputs:
    """Everything a renderer needs about one node of one order."""

    order: str
    strategy: str  # ddp | fsdp | deepspeed | torchtitan
    tracker: str  # tensorboard | mlflow | wandb | ""
    training: TrainingSettings
    packages: tuple[str, ...]
    hostname: str
    constraints: tuple[str, ...] = ()  # pins of what the packages pull in (none on a test host)
    node_rank: int = 0
    nnodes: int = 1
    gpus_per_node: int = 1
    gpu_name: str = ""
    cpu_cores: int = 0
    interconnect: str = "pcie"  # pcie | nvlink-bridge | nvswitch
    network_kind: str = "ethernet"  # ethernet | infiniband
    network_gbps: int = 0
    master_addr: str = SINGLE_NODE_MASTER
    fabric_address: str = ""  # this node's (a cluster's nodes all have one)
    master_port: int = MASTER_PORT
    test_host: bool = False
    facts: NodeFacts = field(default_factory=NodeFacts)
    storage: bool = False  # a bucket was ordered: the checkpoint sync timer runs
    data_devices: tuple[str, ...] = ()
    cluster_hostnames: tuple[str, ...] = ()  # every node of the cluster, by rank

    @property
    def prunes_checkpoints(self) -> bool:
        """torchtitan on a cluster: the checkpoint timer prunes old steps on every node."""
        return self.strategy == "torchtitan" and self.cluster

    @property
    def checkpoint_timer(self) -> bool:
        return self.storage or self.prunes_checkpoints

    @property
    def cluster(self) -> bool:
        return self.nnodes > 1

    @property
    def nproc_per_node(self) -> int:
        return TEST_HOST_NPROC if self.test_host else self.gpus_per_node

    @property
    def world_size(self) -> int:
        return self.nproc_per_node * self.nnodes

    @property
    def backend(self) -> str:
        return "gloo" if self.test_host else "nccl"

    @property
    def infiniband(self) -> bool:
        return self.network_kind == "infiniband"

    @property
    def checkpoint_prefix(self) -> str:
        """Where the sync timer copies ``/data/checkpoints`` (as the retain step does)."""
        return f"checkpoints/{self.hostname}"

    @property
    def dataloader_workers(self) -> int:
        """CPU cores per process, one left for the training loop; 2 to 8."""
        if not self.cpu_cores:
            return 4
        return max(2, min(8, self.cpu_cores // max(1, self.nproc_per_node) - 1))

    @property
    def prefetch_factor(self) -> int:
        """Batches each worker keeps ready: more for small micro-batches (cheap, short steps)."""
        return 4 if self.training.micro_batch <= 2 else 2


def fabric_address(node) -> str:
    """The node's address on the cluster fabric: its ``fabric_address`` field or driver option.
    A node whose driver has no fabric of its own (simulated): its management host stands in."""
    value = getattr(node, "fabric_address", "") or node_options(node).fabric_address
    if not value and options_schema(node.driver).fabric_from_management:
        value = (node.management_address or "").rsplit(":", 1)[0]
    return str(value or "").strip()


def check_stack_runs(stack, training: TrainingSettings) -> None:
    """The stack check again, on the settings about to be rendered (a plan the configurator let
    through, a catalog changed since, an order with no stack row): ValueError naming the lack."""
    needs = Needs.of(sharding=training.sharding, offload=training.offload, tp=training.tp,
                     pp=training.pp, cp=training.cp, finetune=training.finetune,
                     precision=training.precision, family=training.architecture,
                     checkpointing=training.checkpointing)
    if lacking := missing(stack, needs):
        raise ValueError(f"{stack.name} cannot run {', '.join(lacking)} of this order's plan: "
                         f"choose a stack that can (the configurator names one), or size the job "
                         f"again")


def _default_stack():
    """What an order that names no stack runs: DDP as the seed declares it, as it installs it
    (packages.FALLBACK_PACKAGES); this module reads no database (bench/stack_gpu.py renders
    without Django)."""
    return next(s for s in catalog_from_seed().stack if s.slug == "ddp")


def stack_inputs(*, order, node, nodes, facts: NodeFacts | None = None) -> StackInputs:
    """The inputs for ``node`` of ``nodes`` (the cluster, ordered by hostname: rank = index).
    ValueError when the plan holds a wrong value, its layout does not fit the order or its stack,
    or a cluster node has no fabric address."""
    nodes = list(nodes) or [node]
    strategy = order.strategy.slug if order.strategy else "ddp"
    if strategy not in STRATEGIES:
        raise ValueError(f"unknown training stack {strategy!r}; the renderers know "
                         f"{', '.join(STRATEGIES)}")
    rank = next((i for i, n in enumerate(nodes) if n.pk == node.pk), 0)
    master = SINGLE_NODE_MASTER
    if len(nodes) > 1:
        if missing := [n.hostname for n in nodes if not fabric_address(n)]:
            raise ValueError(f"{', '.join(missing)}: no fabric address recorded. A cluster's "
                             f"MASTER_ADDR and NCCL interface are on the fabric, not the "
                             f"management network: record each node's fabric_address and retry.")
        master = fabric_address(nodes[0])
    test_host = is_test_host(node)
    storage = order.has_object_storage
    tracker = order.tracker.slug if order.tracker else ""
    training = training_settings(order.plan, strategy, world_size=order.sku.gpu_count * len(nodes))
    check_stack_runs(order.strategy or _default_stack(), training)
    return StackInputs(
        order=order.reference, strategy=strategy,
        tracker=tracker,
        training=training,
        packages=(stack_packages(order.strategy, strategy, test_host=test_host)
                  + tracker_packages(tracker, test_host=test_host)),
        constraints=() if test_host else CONSTRAINTS,
        hostname=node.hostname, node_rank=rank, nnodes=len(nodes),
        gpus_per_node=order.sku.gpu_count, gpu_name=order.sku.gpu.name,
        cpu_cores=order.sku.cpu_cores, interconnect=order.sku.interconnect,
        network_kind=order.network.kind, network_gbps=order.network.speed_gbps,
        master_addr=master, fabric_address=fabric_address(node), test_host=test_host,
        facts=facts or NodeFacts(), storage=storage,
        data_devices=tuple(node.nvme_devices or ()),
        cluster_hostnames=tuple(n.hostname for n in nodes))
