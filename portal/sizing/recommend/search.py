"""The search: server size (SKU x nodes x network) x strategy x TP x PP x checkpointing x micro-batch.

Every number comes from ``portal.sizing.estimator.estimate``; this module decides which
calls to make. For one server size the hourly price is fixed, so its cheapest and its fastest
configuration are the same one: the search finds the fastest fitting layout per size
(branch and bound), and the Pareto front is taken over sizes.

Pruning, none of which leaves out part of the search space:
- estimator results are memoised; memory does not depend on the GPU, so one memory estimate
  serves every SKU with the same world size;
- a time lower bound per layout (its compute time alone: tokens x hardware FLOPs per token /
  (GPUs x the FLOP rate the estimator's time model gives this GPU, stack and TP width), no
  communication, no pipeline bubble) orders the layouts; once it reaches the best time found
  for the size, no later layout can win;
- memory only grows with the micro-batch and only shrinks with more checkpointing, so a layout
  that does not fit at micro-batch 1 with full checkpointing is skipped at every other
  setting, and micro-batches stop at the first that does not fit;
- with no pipeline the estimator's step time does not depend on the micro-batch (the same
  tokens per step; communication per step is fixed), so only the largest fitting micro-batch
  is timed (fewest accumulation steps, fewest kernel launches); with a pipeline the 1F1B
  bubble shrinks with more micro-batches per step while each micro-batch pays a per-stage
  overhead, so every fitting micro-batch is timed.
  The benchmark and a test check that this finds the same times as the exhaustive loop.

Each layout is sized in its stack's regime (regimes.py: what the stack's rendered launch config
runs), and timed by the estimator's own time model: the plan's time is estimate()'s.
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass, field, replace
from decimal import Decimal
from functools import cached_property, lru_cache
from itertools import chain

from portal.catalog.pricing import JobPrice, Price, Priced, billed_total_usd, job_price, server_price
from portal.sizing.estimator import (
    Estimate,
    GPUSpec,
    Interconnect,
    MemoryEstimate,
    ModelSpec,
    ParallelConfig,
    TrainingConfig,
    comm_floor,
    comm_volume,
    estimate,
    estimate_from_memory,
    estimate_memory,
    flop_rate,
)
from portal.sizing.estimator.compute import bubble_fraction, hardware_flops_per_token

from .catalog import GpuSpec, NetworkOptionSpec, NvmeOptionSpec, SkuSpec, StorageProviderSpec
from .regimes import regime_of
from .stacks import Needs, choose_stack, family_of, missing, strategy_stacks
from .strategies import STRATEGIES, Strategy, layout_supported, max_tp, shape_supported
from .types import SearchOptions, Workload

# The safety margin of GPU memory a plan leaves free (docs/sizing.md, "Safety margin"): the
# estimator's worst under-estimate of per-GPU memory among the published GPU runs made in a regime
# the stacks run (bench/estimator_published.py, both splits: Llama-2-70B LoRA on DeepSpeed ZeRO-3
# over 8 H100s, PEFT's docs, 19.8 % under since its LoRA dropout copies are modelled, 21.8 % before;
# before issue 33's runs: torchtitan Llama 3.1 8B FSDP, 10.4 %) plus the allocator's fragmentation
# beyond the modelled 5 %, NCCL and evaluation spikes (~3 %), and never below 10 % of the GPU.
# tests/sizing/test_margin.py re-runs the bench rows against it.
ESTIMATOR_UNDERCOUNT_FRACTION = 0.198
RUNTIME_SPIKE_FRACTION = 0.03
MIN_MEMORY_RESERVE_FRACTION = 0.10
MEMORY_RESERVE_FRACTION = max(MIN_MEMORY_RESERVE_FRACTION,
                              ESTIMATOR_UNDERCOUNT_FRACTION + RUNTIME_SPIKE_FRACTION)
HOST_RAM_RESERVE_FRACTION = 0.20  # of node RAM kept for the OS, DataLoader workers, page cache
PCIE_GBYTES_PER_S = {3: 16.0, 4: 32.0, 5: 64.0}  # per direction, x16
TIE = 1e-9  # relative tolerance when comparing times


@dataclass(frozen=True)
class Size:
    """One server size: a SKU, a node count and the network between (or into) the nodes."""

    sku: SkuSpec
    gpu: GpuSpec
    nodes: int
    network: NetworkOptionSpec | None
    est_gpu: GPUSpec
    link: Interconnect
    price_hourly_usd: Decimal  # all nodes, GPUs + NVMe + network + storage
    price_monthly_usd: Decimal = Decimal("0")  # the same at the monthly rates

    def __post_init__(self) -> None:
        # read in the search's inner loop: worked out once (the cached properties below)
        self.__dict__.update(world=Size.world.func(self), usable_bytes=Size.usable_bytes.func(self),
                             host_ram_bytes=Size.host_ram_bytes.func(self), key=Size.key.func(self))

    def job_price(self, train_seconds: float) -> JobPrice:
        return job_price(hourly_usd=self.price_hourly_usd, monthly_usd=self.price_monthly_usd,
                         train_hours=train_seconds / 3600)

    def cost(self, train_seconds: float) -> Decimal:
        """The billed total for a job of this length; never falls as the job gets longer."""
        return billed_total_usd(self.price_hourly_usd, self.price_monthly_usd, train_seconds / 3600)

    @cached_property
    def world(self) -> int:
        return self.sku.gpus_per_node * self.nodes

    @cached_property
    def usable_bytes(self) -> int:
        return int(self.gpu.memory_bytes * (1 - MEMORY_RESERVE_FRACTION))

    @cached_property
    def host_ram_bytes(self) -> int:
        return int(self.sku.ram_bytes * (1 - HOST_RAM_RESERVE_FRACTION)) if self.sku.ram_bytes else 0

    @cached_property
    def key(self) -> tuple[str, int, str]:
        return (self.sku.slug, self.nodes, self.network.slug if self.network else "")


def make_link(sku: SkuSpec, gpu: GpuSpec, nodes: int, network: NetworkOptionSpec | None) -> Interconnect:
    """The estimator's Interconnect for a server size.

    Inside a node: NVSwitch gives every GPU its NVLink bandwidth; an NVLink bridge joins pairs,
    so only a 2-GPU server talks over NVLink, larger bridged servers ring over PCIe.
    Between nodes: the catalog's network option is one port per node, shared by its GPUs.
    """
    nvlink = gpu.nvlink_gbytes_per_s
    if nvlink and (sku.interconnect == "nvswitch" or (sku.interconnect == "nvlink-bridge"
                                                       and sku.gpus_per_node == 2)):
        intra, kind = nvlink / 2, "nvlink"
    else:
        intra, kind = PCIE_GBYTES_PER_S[gpu.pcie_gen], f"pcie-gen{gpu.pcie_gen}"
    inter = network.speed_gbit_per_s / sku.gpus_per_node if (network and nodes > 1) else 0.0
    return _interconnect(intra, inter, sku.gpus_per_node, kind, network.kind if network else "none")


@lru_cache(maxsize=1024)
def _interconnect(intra: float, inter: float, gpus_per_node: int, intra_kind: str,
                  inter_kind: str) -> Interconnect:
    """One Interconnect per set of links (sizes on equal links share the searcher's memos by it)."""
    return Interconnect(intra_node_gbps=intra, inter_node_gbit=inter, gpus_per_node=gpus_per_node,
                        intra_kind=intra_kind, inter_kind=inter_kind)


@lru_cache(maxsize=256)
def make_gpu(gpu: GpuSpec) -> GPUSpec:
    """The estimator's GPUSpec of a catalog GPU (one object per GPU: its caches match by identity)."""
    return GPUSpec(name=gpu.name, memory_bytes=gpu.memory_bytes, bf16_tflops=gpu.bf16_tflops,
                   fp8_tflops=gpu.fp8_tflops, fp32_tflops=gpu.fp32_tflops,
                   memory_bandwidth_gbps=gpu.memory_bandwidth_gbytes_per_s,
                   pcie_gbps=PCIE_GBYTES_PER_S[gpu.pcie_gen])


@dataclass(frozen=True, eq=False)  # made once per process by _layout(): identity is equality
class Layout:
    strategy: Strategy
    tp: int
    pp: int
    checkpointing: str  # the plan's value, as the stack's config names it
    stack: str = ""  # slug of the catalog stack that runs it (stacks.choose_stack)


_LAYOUTS: dict[tuple, Layout] = {}  # the Layout value objects, made once per process


@lru_cache(maxsize=16384)
def _config(cls, items: tuple):
    """One config object per distinct setting, across requests: the estimator's caches, keyed
    by these objects, then find them by identity instead of comparing every field."""
    return cls(**dict(items))


def _layout(s: Strategy, tp: int, pp: int, ckpt: str, stack: str) -> Layout:
    key = (s.name, tp, pp, ckpt, stack)
    lay = _LAYOUTS.get(key)
    if lay is None:
        lay = _LAYOUTS[key] = Layout(s, tp, pp, ckpt, stack)
    return lay


@dataclass(frozen=True)
class Candidate:
    """The fastest fitting configuration found for one size."""

    size: Size
    layout: Layout
    dp: int
    micro_batch: int
    grad_accum: int
    estimate: Estimate  # with compute for this size's GPU and link

    @property
    def mfu(self) -> float:
        return self.estimate.compute.mfu

    @property
    def train_seconds(self) -> float:
        return self.estimate.compute.time_to_train_seconds

    @property
    def train_hours(self) -> float:
        return self.train_seconds / 3600

    @cached_property
    def billing(self) -> JobPrice:
        return self.size.job_price(self.train_seconds)

    @property
    def price_total_usd(self) -> Decimal:
        return self.billing.total_usd


@dataclass(frozen=True)
class Miss:
    """The smallest per-GPU memory any layout of a size needed (when none fits)."""

    needed_bytes: int  # smallest per-GPU total among layouts that do not fit on the GPUs
    strategy: Strategy
    tp: int
    pp: int
    offload_cpu_bytes: int = 0  # a CPU-offload layout fit the GPUs but needed this much host RAM
    offload_strategy: Strategy | None = None


@dataclass
class Searcher:
    """Holds the memo of a search; `best(size)` runs the branch and bound.

    Everything memoised here but `timed` depends on the model, the workload's shape, the options,
    the stacks and the catalog's GPUs, not on the tokens to train: a searcher serves later
    requests of the same shape (memo.py) once `begin()` gives it their workload."""

    model: ModelSpec
    workload: Workload  # the request's (begin()); its shape is the searcher's
    options: SearchOptions
    stacks: tuple = ()  # the catalog's strategy stacks (StackOptionSpec), in catalog order
    memory: dict = field(default_factory=dict)  # (strategy, stack, dp, tp, pp, mb, ckpt, nodes) -> estimate
    timed: dict = field(default_factory=dict)  # step times: per request (they depend on the tokens)
    layout_cache: dict = field(default_factory=dict)
    # training and parallel configs; communication floors and volumes, bubbles, stacks and lighter
    # siblings per layout (none depends on the tokens)
    configs: dict = field(default_factory=dict)
    rates: dict = field(default_factory=dict)  # (GPU, stack, TP, checkpointing) -> FLOP/s, hardware FLOPs
    mb_cache: dict = field(default_factory=dict)
    scans: dict = field(default_factory=dict)
    profiles: dict = field(default_factory=dict)  # (layout, world, GPUs per node) -> MemoryProfile
    no_fit: dict = field(default_factory=dict)  # (world, TP limit, GPUs per node) -> classes where none fit
    class_memory: dict = field(default_factory=dict)  # (world, GPUs per node) -> classes made (_ancestors)
    # (world, GPUs per node) -> (TP limit, usable, host RAM) of classes that no layout without offload fits
    offload_needed: dict = field(default_factory=dict)
    ancestors: dict = field(default_factory=dict)  # class -> Searcher._ancestors of it
    calls: int = 0
    evaluated: int = 0

    def __post_init__(self) -> None:
        self.seqs = self.workload.global_batch_sequences  # sequences per optimizer step
        self.begin(self.workload)

    def begin(self, workload: Workload) -> None:
        """Start a request for a workload of this searcher's shape: its tokens, its step times
        and counters."""
        self.workload = workload
        self.tokens = workload.tokens_to_train
        self.steps = self.tokens / workload.global_batch_tokens  # optimizer steps to train
        self.timed, self.calls, self.evaluated = {}, 0, 0

    def training(self, mb: int, ga: int, ckpt: str, stack: str, sharding: str) -> TrainingConfig:
        """The layout's training settings in its stack's regime (regimes.py)."""
        key = (mb, ga, ckpt, stack, sharding)
        tc = self.configs.get(key)
        if tc is None:
            w, regime = self.workload, regime_of(stack)
            knobs = {**regime.training_knobs(ckpt, self.model, w.attention, w.precision),
                     **regime.layout_knobs(sharding, w.precision, w.finetune),
                     **regime.adapter_knobs(self.model, w.finetune)}
            base = dict(precision=w.precision, optimizer=w.optimizer, micro_batch=mb, seq_len=w.seq_len,
                        grad_accum=ga, checkpointing=ckpt, attention=w.attention, finetune=w.finetune,
                        lora_rank=w.lora_rank or 16, use_dora=w.use_dora)
            tc = self.configs[key] = _config(TrainingConfig, tuple({**base, **knobs}.items()))
        return tc

    def parallel(self, s: Strategy, dp: int, tp: int, pp: int, stack: str, nodes: int) -> ParallelConfig:
        nodes = nodes if s.sharding == "fsdp-hybrid" else 1
        key = (s.sharding, s.offload, dp, tp, pp, stack, nodes)
        pc = self.configs.get(key)
        if pc is None:
            knobs = regime_of(stack).parallel_knobs(sharding=s.sharding, tp=tp, pp=pp, dp=dp, nodes=nodes,
                                                    model=self.model, offload=s.offload)
            base = dict(dp=dp, sharding=s.sharding, offload=s.offload, tp=tp, pp=pp)
            pc = self.configs[key] = _config(ParallelConfig, tuple({**base, **knobs}.items()))
        return pc

    def configs_of(self, lay: Layout, dp: int, mb: int, nodes: int) -> tuple[TrainingConfig, ParallelConfig]:
        ga = self.seqs // (mb * dp)
        return (self.training(mb, ga, lay.checkpointing, lay.stack, lay.strategy.sharding),
                self.parallel(lay.strategy, dp, lay.tp, lay.pp, lay.stack, nodes))

    def mem(self, lay: Layout, dp: int, mb: int, nodes: int,
            ckpt: str | None = None) -> MemoryEstimate | None:
        """Memory estimate (no GPU: it serves every SKU with this layout), memoised; None when
        the estimator rejects the layout or cannot represent it (its estimate says unmodelled)."""
        ckpt = ckpt or lay.checkpointing
        s = lay.strategy
        # by what the estimate depends on (a layout's most frugal check is its full-checkpointing
        # sibling's estimate)
        key = (s.name, lay.stack, dp, lay.tp, lay.pp, mb, ckpt, nodes if s.sharding == "fsdp-hybrid" else 1)
        try:
            return self.memory[key]
        except KeyError:
            pass
        self.calls += 1
        ga = self.seqs // (mb * dp)
        try:
            est = estimate_memory(self.model, self.training(mb, ga, ckpt, lay.stack, s.sharding),
                                  self.parallel(s, dp, lay.tp, lay.pp, lay.stack, nodes))
        except ValueError:
            est = None
        if est is not None and est.unmodelled:
            est = None
        self.memory[key] = est
        return est

    def time(self, size: Size, lay: Layout, dp: int, mb: int) -> Estimate:
        """The estimate on this size's GPU and link: the memoised memory part plus the step time
        in the estimator's own time model."""
        # by what it depends on: sizes of other servers with the same GPU and links share it
        key = (size.est_gpu, size.link, size.nodes, lay, dp, mb)
        est = self.timed.get(key)
        if est is None:
            self.calls += 1
            memory = self.mem(lay, dp, mb, size.nodes)
            est = self.timed[key] = estimate_from_memory(memory, size.est_gpu, size.link, self.tokens)
        return est

    def comm_floor_seconds(self, size: Size, lay: Layout, bound: float, mb: int = 0) -> float:
        """Seconds to train that the layout's communication adds at least on this size, given
        its compute bound (estimator.comm_floor; at micro-batch mb, by default at the largest:
        the least data-parallel traffic per step; the activation traffic does not depend on it)."""
        dp = size.world // (lay.tp * lay.pp)
        if not mb:
            mbs = self.micro_batches(dp)
            if not mbs:
                return 0.0
            mb = mbs[-1]
        key = ("floor", size.link, size.world, size.nodes, lay.strategy.name, lay.stack, lay.tp, lay.pp, mb)
        floor = self.configs.get(key)
        if floor is None:
            training, parallel = self.configs_of(lay, dp, mb, size.nodes)
            vkey = ("volume", training, parallel)  # the bytes do not depend on the link: per layout
            try:
                volume = self.configs.get(vkey)
                if volume is None:
                    volume = self.configs[vkey] = comm_volume(self.model, training, parallel)
                floor = comm_floor(self.model, training, parallel, size.link, volume)
            except (ValueError, ZeroDivisionError):
                floor = 0.0  # a layout the estimator refuses: sizing it says so
            self.configs[key] = floor
        if not floor:
            return 0.0
        steps = self.steps
        compute = bound * (1 - self.least_bubble(lay, size.world)) / steps
        return floor.exposed(compute) * steps

    def mb_bound(self, size: Size, lay: Layout, bound: float, dp: int, mb: int) -> float:
        """A pipelined layout's time bound at one micro-batch: its compute over that
        micro-batch's bubble, plus the communication floor at that micro-batch."""
        compute = bound * (1 - self.least_bubble(lay, size.world))
        bubble = bubble_fraction(lay.pp, self.seqs // (mb * dp), 1,
                                 regime_of(lay.stack).pp_schedule)
        return compute / (1 - bubble) + self.comm_floor_seconds(size, lay, bound, mb)

    def rate(self, gpu: GPUSpec, lay: Layout) -> tuple[float, float]:
        """(FLOP/s per GPU, hardware FLOPs per token) of a layout's compute in the estimator's
        time model, per GPU, stack, TP width and checkpointing (cached: a few dozen per request)."""
        key = (gpu.name, lay.stack, lay.tp, lay.checkpointing)  # the sharding does not change it
        out = self.rates.get(key)
        if out is None:
            tc = self.training(1, 1, lay.checkpointing, lay.stack, lay.strategy.sharding)
            replicated = regime_of(lay.stack).replicated_tp(lay.tp)
            out = self.rates[key] = (flop_rate(self.model, tc, gpu, replicated)[0],
                                     hardware_flops_per_token(self.model, tc))
        return out

    def fits(self, size: Size, est: Estimate | MemoryEstimate | None) -> bool:
        return _fits(est, size.usable_bytes, size.host_ram_bytes, size.sku.gpus_per_node)

    def scale(self, size: Size) -> float:
        """Seconds per unit of a layout's relative bound on this size: tokens / GPUs."""
        return self.tokens / size.world

    def layouts(self, size: Size) -> list[tuple[float, int, Layout]]:
        """Supported layouts of a size with their time lower bound (seconds), fastest first.

        The bound is tokens x hardware FLOPs per token / (GPUs x FLOP rate): the compute time
        alone. Its order depends only on the world size, the TP limit, GPUs per node and the
        GPU, so that is cached."""
        scale = self.scale(size)
        entries, rels, _ = self._layout_list(size)
        return [(rels[g] * scale, order, lay) for g, order, lay in entries]

    def _layout_list(self, size: Size) -> tuple[list[tuple[int, int, Layout]], list[float], list]:
        """(entries, rels, offload): the size's layouts in bound order as (group, order, layout),
        each group's relative bound on its GPU, and a one-item list that holds the positions of
        the layouts with CPU offload once asked (Searcher.offload_positions). All but rels are
        shared by every GPU model that puts the groups in the same order."""
        world, per_node = size.world, size.sku.gpus_per_node
        tp_limit = max_tp(size.sku.interconnect, per_node)
        key = (world, tp_limit, per_node, size.gpu.slug)
        out = self.layout_cache.get(key)
        if out is None:
            groups = self._groups(world, tp_limit, per_node)
            per_flop = self._seconds_per_flop(size.est_gpu)
            try:
                rels = [per_flop[gkey] / keep for _, gkey, _, keep in groups]  # keep: 1 - least bubble
            except KeyError:
                gpu = size.est_gpu
                for _, gkey, ents, _ in groups:
                    if gkey not in per_flop:
                        rate, flops = self.rate(gpu, ents[0][2])
                        per_flop[gkey] = flops / rate
                rels = [per_flop[gkey] / keep for _, gkey, _, keep in groups]
            # ties in the order the groups were made (sorted is stable)
            perm = tuple(sorted(range(len(groups)), key=rels.__getitem__))
            pkey = ("order", world, tp_limit, per_node, perm)
            shared = self.layout_cache.get(pkey)
            if shared is None:
                entries = list(chain.from_iterable([groups[g][2] for g in perm]))
                shared = self.layout_cache[pkey] = (entries, [None])
            out = self.layout_cache[key] = (shared[0], rels, shared[1])
        return out

    def _seconds_per_flop(self, gpu: GPUSpec) -> dict:
        """Group key (stack, TP, checkpointing, PP) -> hardware FLOPs per token / FLOP rate on
        this GPU (PP does not change it: the bubble is the group's keep)."""
        key = ("per flop", gpu.name)
        out = self.layout_cache.get(key)
        if out is None:
            out = self.layout_cache[key] = {}
        return out

    def _groups(self, world: int, tp_limit: int, per_node: int) -> list[tuple[int, tuple, list, float]]:
        """The layouts of a world size, in strategy x TP x PP x stack x checkpointing order, in
        groups that share their time bound on every GPU (the same stack, TP, checkpointing and
        PP): (first order, group key, [(group index, order, layout)], 1 - the least bubble on
        this world), in the order of their first layouts.

        Only layouts a stack declares (stacks_of), and with it only the checkpointing modes that
        stack has (its regime)."""
        key = ("groups", world, tp_limit, per_node)
        out = self.layout_cache.get(key)
        if out is not None:
            return out
        seqs = self.workload.global_batch_sequences
        by_key: dict[tuple, list] = {}
        order = 0
        for s, tp, pp, lays in self._templates():
            if tp > tp_limit or world % (tp * pp) or seqs % (world // (tp * pp)):
                continue
            if not layout_supported(s, tp, pp, world, per_node):
                continue
            for lay in lays:
                by_key.setdefault((lay.stack, tp, lay.checkpointing, pp), []).append((order, lay))
                order += 1
        bubble = self.least_bubble
        out = self.layout_cache[key] = [(members[0][0], k, ents, 1 - bubble(members[0][1], world))
                                        for g, (k, members) in enumerate(by_key.items())
                                        for ents in ([(g, order, lay) for order, lay in members],)]
        return out

    def _templates(self) -> list[tuple[Strategy, int, int, list[Layout]]]:
        """Every (strategy, TP, PP) of the search space with its layouts (one per stack that can
        run it and checkpointing mode that stack has), whatever the world size."""
        out = self.layout_cache.get("templates")
        if out is None:
            names = self.options.strategies
            out = []
            for s in STRATEGIES:
                if names and s.name not in names:
                    continue
                for tp in self.options.tp_sizes:
                    for pp in self.options.pp_sizes:
                        if not shape_supported(s, tp, pp):
                            continue
                        lays = [_layout(s, tp, pp, ckpt, stack) for stack in self.stacks_of(s, tp, pp)
                                for ckpt in self.options.checkpointing
                                if regime_of(stack).policy(ckpt, self.model) is not None]
                        if lays:
                            out.append((s, tp, pp, lays))
            self.layout_cache["templates"] = out
        return out

    def least_bubble(self, lay: Layout, world: int) -> float:
        """The smallest pipeline bubble the layout can have on this world size: the most
        micro-batches per step (the smallest micro-batch), in its stack's schedule."""
        if lay.pp == 1:
            return 0.0
        key = ("bubble", world, lay.tp, lay.pp, lay.stack)
        out = self.configs.get(key)
        if out is None:
            dp = world // (lay.tp * lay.pp)
            mbs = self.micro_batches(dp)
            out = 0.0
            if mbs:
                out = bubble_fraction(lay.pp, self.seqs // (mbs[0] * dp), 1,
                                      regime_of(lay.stack).pp_schedule)
            self.configs[key] = out
        return out

    def stacks_of(self, s: Strategy, tp: int, pp: int) -> tuple[str, ...]:
        """The slugs of the stacks that can run the strategy with this TP and PP for this
        workload and model: every stack of the catalog that declares all the layout needs
        (stacks.missing) and whose config trains this model (regimes), the one
        stacks.choose_stack picks first. Each is a layout of its own: the time model decides
        between them in its regime; at equal time the first wins. None: not proposed."""
        key = ("stacks", s.name, tp > 1, pp > 1)  # a stack declares TP / PP, not their sizes
        slugs = self.configs.get(key)
        if slugs is None:
            w = self.workload
            needs = Needs.of(sharding=s.sharding, offload=s.offload, tp=tp, pp=pp, finetune=w.finetune,
                             precision=w.precision, family=family_of(w.model))
            first = choose_stack(needs, self.stacks, prefer=s.stack)
            able = [st.slug for st in strategy_stacks(self.stacks) if not missing(st, needs)]
            if first is not None:
                able = [first.slug, *(x for x in able if x != first.slug)]
            slugs = self.configs[key] = tuple(x for x in able if regime_of(x).runs(self.model, w.precision))
        return slugs

    def micro_batches(self, dp: int) -> list[int]:
        mbs = self.mb_cache.get(dp)
        if mbs is None:
            seqs = self.workload.global_batch_sequences
            mbs = self.mb_cache[dp] = [m for m in sorted(self.options.micro_batches) if seqs % (m * dp) == 0]
        return mbs

    def start(self, size: Size) -> SizeState:
        return SizeState(size, self.scale(size))

    def scan(self, size: Size) -> Scan:
        """The memory decisions for a size's layouts, shared with every size of the same class.

        Memory does not depend on the GPU model or the link, so whether a layout fits (and at
        which micro-batch) is the same for every size with the same world size, TP limit,
        usable GPU memory, host RAM and GPUs per node (one SKU over each network): it is
        decided once per class, when the first size gets that far in its walk, and layouts
        known not to fit are then skipped by every other size of the class. (The class also
        names the GPU: the layouts' order is by their time bound on it.)"""
        key = (size.world, max_tp(size.sku.interconnect, size.sku.gpus_per_node), size.usable_bytes,
               size.host_ram_bytes, size.sku.gpus_per_node, size.gpu.slug)
        sc = self.scans.get(key)
        if sc is None:
            layouts, rels, offload = self._layout_list(size)
            shared = self.scans.get(key[:-1])
            if shared is None:
                shared = self.scans[key[:-1]] = self._known_misses(*key[:-1])
                self.ancestors[key[:-1]] = self._ancestors(size.world, size.sku.gpus_per_node,
                                                           size.usable_bytes, size.host_ram_bytes, shared)
            sc = self.scans[key] = Scan(layouts, size.world, size.usable_bytes, size.host_ram_bytes,
                                        size.sku.gpus_per_node,
                                        [None] * len(layouts), list(range(len(layouts) + 1)), shared=shared,
                                        layouts_key=key[1], rels=rels, ancestors=self.ancestors[key[:-1]])
            self._offload_only_if_needed(sc, offload)
        return sc

    def _offload_only_if_needed(self, sc: Scan, offload: list) -> None:
        """CPU offload only when memory needs it: when a layout without offload fits this class,
        its offloading layouts are not proposed (they trade the host's optimizer step and PCIe
        traffic for GPU memory the job does not need). offload: [positions of the layouts with
        offload in the class's list], worked out once per list when first asked."""
        at = offload[0]
        if at is None:
            at = offload[0] = [i for i, (_, _, lay) in enumerate(sc.layouts)
                               if lay.strategy.offload != "none"]
        if not at:
            return
        needed = sc.shared.get("offload needed")  # memory alone decides it: shared across GPU models
        if needed is None:
            needed = sc.shared["offload needed"] = self._offload_needed(sc)
        if needed:
            return
        decided, skip = sc.decided, sc.skip
        for i in at:
            decided[i], skip[i] = NO_FIT, i + 1

    def _offload_needed(self, sc: Scan) -> bool:
        """Whether no layout of the class without offload fits at its most frugal. Known without
        looking when a class of the same world size and GPUs per node needed it with at least this
        GPU memory, host RAM and TP limit (its layouts include this class's)."""
        known = self.offload_needed.setdefault((sc.world, sc.gpus_per_node), [])
        for tp_limit, usable, host_ram in known:
            if sc.layouts_key <= tp_limit and _no_roomier(sc.usable, sc.host_ram, usable, host_ram):
                return True
        if any(self.frugal_fit(lay, sc.world, sc.usable, sc.host_ram, sc.gpus_per_node)
               for _, _, lay in sc.layouts if lay.strategy.offload == "none"):
            return False
        known.append((sc.layouts_key, sc.usable, sc.host_ram))
        return True

    def frugal_fit(self, lay: Layout, world: int, usable: int, host_ram: int, per_node: int) -> bool:
        """Whether the layout fits at its most frugal (MemoryProfile.frugal)."""
        return self.profile(lay, world, per_node).frugal(usable, host_ram)

    def profile(self, lay: Layout, world: int, per_node: int) -> MemoryProfile:
        """The layout's per-GPU memory on a world size, micro-batch by micro-batch (worked out
        as asked), for every class of sizes with that world size and GPUs per node."""
        key = (lay, world, per_node)
        pr = self.profiles.get(key)
        if pr is None:
            dp = world // (lay.tp * lay.pp)
            least = "full" if "full" in self.options.checkpointing else lay.checkpointing
            pr = self.profiles[key] = MemoryProfile(self, lay, dp, world // per_node, per_node,
                                                    self.micro_batches(dp), least)
        return pr

    def decide(self, sc: Scan, i: int) -> tuple | None:
        """Whether layout i of a class fits: (dp, micro-batch to time, further micro-batches to
        time under a pipeline) or None. Its smallest memory is at micro-batch 1 with full checkpointing;
        memory only grows with the micro-batch, so micro-batches stop at the first that does
        not fit. Pipelined layouts compete with flat ones on time: pipeline stages are proposed
        when memory needs them or when the time model makes them faster."""
        _, _, lay = sc.layouts[i]
        known = sc.shared.get(lay)
        if known is None:
            for other in sc.ancestors:  # a class with more memory where it did not fit (_ancestors)
                known = other.get(lay)
                if known is not None:
                    if known.__class__ is MemoryEstimate:
                        sc.shared[lay] = known
                    else:
                        known = None  # it fit there or only its own checkpointing did not: decide here
                    break
        if known is not None:
            sc.decided[i] = known
            if type(known) is tuple:
                return known
            sc.skip[i] = i + 1
            return None
        sc.shared[lay] = entry = self._decide(sc, lay)
        sc.decided[i] = entry
        if type(entry) is tuple:
            return entry
        sc.skip[i] = i + 1
        return None

    def _decide(self, sc: Scan, lay: Layout):
        pr = self.profiles.get((lay, sc.world, sc.gpus_per_node)) or self.profile(lay, sc.world,
                                                                                   sc.gpus_per_node)
        fit = pr.fitting(sc.usable, sc.host_ram)
        if not fit:
            if pr.mbs and not pr.least_fits(sc.usable, sc.host_ram):
                return pr.memory(-1) or NO_FIT  # a MemoryEstimate: kept for the closest miss
            return NO_FIT
        if lay.pp > 1:
            # 1F1B: the bubble shrinks with more micro-batches per step, but each micro-batch
            # pays the estimator's per-stage overhead: every fitting micro-batch is timed.
            return (pr.dp, fit[0], fit[1:])
        return (pr.dp, fit[-1], ())

    def closest_miss(self, sc: Scan) -> Miss | None:
        """Every layout of the class decided and none fits: the closest miss, in bound order."""
        if sc.miss is None:
            miss = None
            for (_, _, lay), smallest in zip(sc.layouts, sc.decided, strict=True):
                if isinstance(smallest, MemoryEstimate):
                    miss = _record_miss(miss, smallest, sc.usable, sc.gpus_per_node, lay)
            sc.miss = miss or NO_FIT
            # a class where nothing fits tells the classes with less memory made later (_known_misses)
            self.no_fit.setdefault((sc.world, sc.layouts_key, sc.gpus_per_node), []).append(
                (sc.usable, sc.host_ram, sc.shared))
        return sc.miss if isinstance(sc.miss, Miss) else None

    def advance(self, st: SizeState, dominated=None) -> None:
        """Explore the size's layouts in bound order until the first fitting one (dominated is
        None) or, after that, until no remaining layout can beat the size's best or reach the
        Pareto front (dominated(seconds, cost) says another size already beats that point; cost:
        the size's price as a function of the seconds).

        Layouts that a size of the same class found not to fit are skipped: they give no
        candidate, and bounds only grow along the list (such a layout would stop the walk only
        where the next layout would stop it too)."""
        size = st.size
        sc = st.scan
        if sc is None:
            sc = st.scan = self.scan(size)
        layouts, decided, skip, rels = sc.layouts, sc.decided, sc.skip, sc.rels
        scale, cost, n = st.scale, size.cost, len(layouts)
        i = _next(skip, st.next)
        while i < n:
            g, _, lay = layouts[i]
            bound = rels[g] * scale
            best = st.best
            if best is not None:
                if dominated is None or bound >= best.train_seconds * (1 - TIE):
                    st.next = i
                    return
                if dominated(bound, cost):
                    st.next = i
                    return
                # the communication the estimator will add (known without sizing the layout:
                # comm_floor) tightens the bound; evaluated at the compute's lower bound
                tight = bound + self.comm_floor_seconds(size, lay, bound)
                if tight >= best.train_seconds * (1 - TIE) or dominated(tight, cost):
                    i += 1
                    if skip[i] != i:
                        i = _next(skip, i)
                    continue
            entry = decided[i]
            if entry is None:
                entry = self.decide(sc, i)
            if type(entry) is tuple:
                lighter = self.lighter_fit(sc, lay)
                if max((entry[1], *entry[2])) > lighter:
                    self._run(st, lay, bound, dominated, *entry, lighter)
            i += 1
            if skip[i] != i:
                i = _next(skip, i)
        st.next = n
        if st.best is None:
            st.miss = self.closest_miss(sc)

    def _ancestors(self, world: int, per_node: int, usable: int, host_ram: int, shared: dict) -> tuple:
        """The shared decisions of the classes of this world size and GPUs per node made so far
        that have at least this GPU memory and host RAM, nearest first: a layout whose most
        frugal setting did not fit one of them (its decision there is that MemoryEstimate) fits
        no micro-batch here either, with the same estimate for the closest miss (memory only
        grows from the most frugal setting; the one-micro-batch check is against the same
        bytes). The classes of a world are made largest first, so the nearest is the one with
        the least memory; its own ancestors follow it (holding at least as much)."""
        known = self.class_memory.setdefault((world, per_node), [])
        nearest = None
        for other_usable, other_ram, other, theirs in known:
            if _no_roomier(usable, host_ram, other_usable, other_ram):
                if nearest is None or other_usable < nearest[0]:
                    nearest = (other_usable, (other, *theirs))
        mine = nearest[1] if nearest else ()
        known.append((usable, host_ram, shared, mine))
        return mine

    def _known_misses(self, world: int, tp_limit: int, usable: int, host_ram: int, per_node: int) -> dict:
        """A new class's shared decisions: a copy of those of a class of the same world size in
        which no layout fit although it had at least this GPU memory and host RAM (none can fit
        with less), else empty."""
        for other_usable, other_ram, decisions in self.no_fit.get((world, tp_limit, per_node), ()):
            if _no_roomier(usable, host_ram, other_usable, other_ram):
                return dict(decisions)
        return {}

    def lighter_fit(self, sc: Scan, lay: Layout) -> int:
        """The largest micro-batch at which a sibling of the layout that recomputes less (same
        strategy, stack, TP and PP; fewer hardware FLOPs per token) fits this class; 0: none.

        At the same micro-batch such a sibling is never slower: its compute is smaller and
        every other term of the step is the same or (data-parallel traffic hidden behind the
        compute) shrinks by at most 0.9 x the compute it saves. That holds without CPU offload
        and async TP; and without a pipeline the step only gets faster with the micro-batch.
        So the layout needs timing only at micro-batches above that (equal times keep the
        sibling, which comes first)."""
        if lay.strategy.offload != "none":
            return 0
        known = sc.shared.get(("lighter", lay))  # memory alone decides it: shared across GPU models
        if known is not None:
            return known
        key = ("lighter", lay)
        lighter = self.configs.get(key)
        if lighter is None:
            flops = self.rates_flops(lay)
            lighter = self.configs[key] = tuple(
                sib for sib in self.siblings(lay) if self.rates_flops(sib) < flops)
        if not lighter:
            sc.shared[key] = 0
            return 0
        best = 0
        for sib in lighter:
            pr = self.profile(sib, sc.world, sc.gpus_per_node)
            fit = pr.fitting(sc.usable, sc.host_ram)
            if lay.pp > 1:  # at every micro-batch up to it (the step time is not monotone in it)
                fit = [mb for mb, own in zip(fit, pr.mbs, strict=False) if mb == own]
            if fit:
                best = max(best, fit[-1])
        if best and lay.tp > 1 and self.parallel(lay.strategy, sc.world // (lay.tp * lay.pp), lay.tp, lay.pp,
                                                 lay.stack, sc.world // sc.gpus_per_node).async_tp:
            best = 0
        sc.shared[key] = best
        return best

    def siblings(self, lay: Layout) -> tuple[Layout, ...]:
        """The layouts that differ from lay only in their checkpointing."""
        return tuple(_LAYOUTS[key] for key in ((lay.strategy.name, lay.tp, lay.pp, c, lay.stack)
                                               for c in self.options.checkpointing)
                     if key in _LAYOUTS and _LAYOUTS[key] is not lay)

    def rates_flops(self, lay: Layout) -> float:
        """Hardware FLOPs per token of the layout's training (its checkpointing in its regime)."""
        key = ("flops", lay.stack, lay.checkpointing)
        out = self.configs.get(key)
        if out is None:
            out = self.configs[key] = hardware_flops_per_token(
                self.model, self.training(1, 1, lay.checkpointing, lay.stack, lay.strategy.sharding))
        return out

    def _run(self, st: SizeState, lay: Layout, bound: float, dominated, dp: int, pick: int,
             more: tuple = (), lighter: int = 0) -> None:
        """Time a layout that fits at micro-batch `pick` (and at `more`); keep the size's fastest.
        Micro-batches up to `lighter` are left to a sibling that recomputes less (lighter_fit)."""
        if pick <= lighter:
            more = tuple(mb for mb in more if mb > lighter)
            if not more:
                return
            pick, more = more[0], more[1:]
        # Under a pipeline the step time is convex in the number of micro-batches m (the bubble
        # ~ C/m against per-micro-batch costs ~ c*m: the stage overhead and, with sharded
        # weights, the data-parallel traffic), so it is unimodal over the micro-batch sizes:
        # walk from the end whose bound is lower to the first micro-batch slower than the last
        # one timed, leaving out those whose own bound cannot beat the size's best (the minimum
        # of a unimodal function lies before the first rise seen from either end).
        if not more:
            self._time_one(st, lay, dp, pick)
            return
        size, cost = st.size, st.size.cost
        mbs = (pick, *more)
        bounds = {mb: self.mb_bound(size, lay, bound, dp, mb) for mb in mbs}
        if bounds[mbs[-1]] < bounds[mbs[0]]:
            mbs = mbs[::-1]
        last = None
        for mb in mbs:
            tight = bounds[mb]
            if st.best is not None and (tight >= st.best.train_seconds * (1 - TIE)
                                        or (dominated and dominated(tight, cost))):
                continue
            t = self._time_one(st, lay, dp, mb)
            if last is not None and t > last:
                break
            last = t

    def _time_one(self, st: SizeState, lay: Layout, dp: int, pick: int) -> float:
        size = st.size
        self.evaluated += 1
        est = self.time(size, lay, dp, pick)
        c = est.compute
        if st.best is None or c.time_to_train_seconds < st.best.train_seconds * (1 - TIE):
            st.best = Candidate(size, lay, dp, pick, self.seqs // (pick * dp), est)
        return c.time_to_train_seconds

    def best(self, size: Size) -> tuple[Candidate | None, Miss | None]:
        """The fastest fitting configuration of one size (full branch and bound)."""
        st = self.start(size)
        self.advance(st)
        self.advance(st, dominated=lambda t, cost: False)
        return st.best, (None if st.best else st.miss)


def _no_roomier(usable: int, host_ram: int, other_usable: int, other_ram: int) -> bool:
    """Whether a class has at most another's GPU memory and host RAM (0: unlimited), so what
    does not fit the other does not fit it either."""
    return usable <= other_usable and (not other_ram or bool(host_ram and host_ram <= other_ram))


def _node_cpu_bytes(est: Estimate | MemoryEstimate, gpus_per_node: int) -> int:
    """Host RAM per node for offloaded state: the ranks of one node."""
    if isinstance(est, MemoryEstimate):
        return est.cpu_bytes_per_node(gpus_per_node)
    return est.cpu_bytes


def _fits(est: Estimate | MemoryEstimate | None, usable: int, host_ram: int, gpus_per_node: int) -> bool:
    if est is None or est.per_gpu.total > usable:
        return False
    cpu = _node_cpu_bytes(est, gpus_per_node)
    return not (cpu and host_ram and cpu > host_ram)


def _record_miss(miss: Miss | None, est: MemoryEstimate, usable: int, gpus_per_node: int,
                 lay: Layout) -> Miss:
    total, s = est.per_gpu.total, lay.strategy
    if total <= usable:  # fits the GPUs: host RAM is what failed
        cpu = _node_cpu_bytes(est, gpus_per_node)
        if miss is None:
            return Miss(total, s, lay.tp, lay.pp, cpu, s)
        if not miss.offload_cpu_bytes or cpu < miss.offload_cpu_bytes:
            return replace(miss, offload_cpu_bytes=cpu, offload_strategy=s)
        return miss
    if miss is None:
        return Miss(total, s, lay.tp, lay.pp)
    if miss.needed_bytes <= usable or total < miss.needed_bytes:
        return replace(miss, needed_bytes=total, strategy=s, tp=lay.tp, pp=lay.pp)
    return miss


NO_FIT = "no fit"  # Scan.decided: no micro-batch of the layout fits (and no memory to report)
UNSIZED = (float("inf"), 0)  # a layout the estimator refuses or cannot represent: fits nowhere


class MemoryProfile:
    """One layout on one world size: (per-GPU bytes, host bytes per node) at each of its
    micro-batches, and at the smallest with full checkpointing (index -1), from the
    searcher's memoised estimates, worked out when first asked."""

    __slots__ = ("searcher", "lay", "dp", "nodes", "per_node", "mbs", "least", "sizes", "least_size",
                 "least_est", "counts", "whole_at_last")

    def __init__(self, searcher: Searcher, lay: Layout, dp: int, nodes: int, per_node: int, mbs: list[int],
                 least: str) -> None:
        # a proxy: the searcher holds its profiles, and a cycle would leave every estimate of the
        # request for the garbage collector (whose passes over them cost more than the search)
        self.searcher = weakref.proxy(searcher)
        self.lay, self.dp, self.nodes, self.per_node = lay, dp, nodes, per_node
        self.mbs, self.least = mbs, least
        self.sizes: list = [None] * len(mbs)
        self.least_size = None
        self.least_est: MemoryEstimate | None | bool = False  # False: not asked yet
        self.counts: dict = {}  # (usable, host RAM) -> fitting()
        # the largest micro-batch is the whole step's batch per rank: no gradient accumulation
        self.whole_at_last = bool(mbs) and mbs[-1] * dp == searcher.seqs

    def memory(self, j: int) -> MemoryEstimate | None:
        if j < 0:
            if self.least_est is False:
                self.least_est = self.searcher.mem(self.lay, self.dp, self.mbs[0], self.nodes, self.least)
            return self.least_est
        return self.searcher.mem(self.lay, self.dp, self.mbs[j], self.nodes)

    def size(self, j: int) -> tuple:
        out = self.least_size if j < 0 else self.sizes[j]
        if out is None:
            est = self.memory(j)
            out = UNSIZED if est is None else (est.per_gpu.total, est.cpu_bytes_per_node(self.per_node))
            if j < 0:
                self.least_size = out
            else:
                self.sizes[j] = out
        return out

    def fitting(self, usable: int, host_ram: int) -> tuple[int, ...]:
        """The micro-batches that fit with the layout's own checkpointing, smallest first.

        Memory grows with the micro-batch while gradients accumulate: if not even the smallest
        micro-batch fits with full checkpointing, none of those does; otherwise upwards to the
        first that does not fit. At one micro-batch per step (no accumulation) the gradients
        are freed before the next forward (estimator: grads_freed_between_steps), so that
        largest micro-batch may fit when smaller ones do not: it is checked too."""
        key = (usable, host_ram)
        out = self.counts.get(key)
        if out is not None:
            return out
        mbs, sizes, size = self.mbs, self.sizes, self.size
        n, last = 0, len(mbs) - 1
        if mbs:
            total, cpu = self.least_size or size(-1)
            least_ok = total <= usable and not (cpu and host_ram and cpu > host_ram)
        else:
            least_ok = False
        if least_ok:
            while n <= last:
                total, cpu = sizes[n] or size(n)
                if total > usable or (cpu and host_ram and cpu > host_ram):
                    break
                n += 1
        out = tuple(mbs[:n])
        if n <= last and self.whole_at_last:
            # freeing the gradients saves at most their bytes (and the allocator's share of
            # them) and everything else only grows from the most frugal setting: skip the
            # check when that setting needs more than the GPU holds even without them
            est = self.least_est if self.least_est is not False else self.memory(-1)
            if est is None or least_ok or est.per_gpu.total - 1.1 * est.per_gpu.gradients <= usable:
                total, cpu = sizes[last] or size(last)
                if total <= usable and not (cpu and host_ram and cpu > host_ram):
                    out = (*out, mbs[last])
        self.counts[key] = out
        return out

    def least_fits(self, usable: int, host_ram: int) -> bool:
        """Whether the smallest micro-batch fits with full checkpointing."""
        if not self.mbs:
            return False
        total, cpu = self.least_size or self.size(-1)
        return total <= usable and not (cpu and host_ram and cpu > host_ram)

    def frugal(self, usable: int, host_ram: int) -> bool:
        """Whether the layout fits at its most frugal (smallest micro-batch, full
        checkpointing) or at some micro-batch of its own."""
        return self.least_fits(usable, host_ram) or bool(self.fitting(usable, host_ram))



@dataclass
class Scan:
    """Memory decisions for one class of sizes (Searcher.scan), made lazily per layout."""

    layouts: list  # (group, order, layout), fastest first
    world: int
    usable: int
    host_ram: int
    gpus_per_node: int
    # per layout: None (not decided yet), (dp, micro-batch, further micro-batches to time under
    # a pipeline) when it fits, else its smallest MemoryEstimate (for the closest miss) or NO_FIT
    decided: list
    skip: list  # skip[i] == i unless layout i does not fit; then a later index (see _next)
    miss: Miss | str | None = None  # closest_miss(), once worked out
    # the same decisions by layout, shared by the classes that differ only in the GPU model
    # (memory does not depend on it; only the order of the layouts does)
    shared: dict = field(default_factory=dict)
    layouts_key: int = 0  # the TP limit the class's layouts were made for
    rels: list = field(default_factory=list)  # relative time bound of each group on the class's GPU
    ancestors: tuple = ()  # shared decisions of classes with at least this memory (Searcher._ancestors)


def _next(skip: list, i: int) -> int:
    """The first layout at or after i not known to miss (path-halving "next" pointers)."""
    while skip[i] != i:
        skip[i] = skip[skip[i]]
        i = skip[i]
    return i


@dataclass
class SizeState:
    size: Size
    scale: float  # seconds per unit of relative bound
    scan: Scan | None = None  # shared with the sizes of the same memory class, from the first advance
    next: int = 0  # index of the next layout (in scan.layouts) to consider
    best: Candidate | None = None
    miss: Miss | None = None


def naive_best(searcher: Searcher, size: Size) -> Candidate | None:
    """The same search space without pruning or memo: every layout x micro-batch is estimated
    (memory and time in one call). For the benchmark and the equivalence test."""
    best = None
    layouts = [lay for _, _, lay in searcher.layouts(size)]
    runs = {lay: _naive_runs(searcher, size, lay) for lay in layouts}
    flat_fits = any(lay.strategy.offload == "none" and (any(f for _, f in runs[lay]) or
                                                      _naive_frugal_fit(searcher, size, lay))
                    for lay in layouts)
    for lay in layouts:
        if flat_fits and lay.strategy.offload != "none":
            continue  # offload only when memory needs it
        for cand, fits in runs[lay]:
            if not fits:
                continue
            if best is None or cand.train_seconds < best.train_seconds * (1 - TIE):
                best = cand
    return best


def _naive_runs(searcher: Searcher, size: Size, lay: Layout) -> list[tuple[Candidate | None, bool]]:
    """Every micro-batch of a layout, estimated with GPU and link: (candidate, fits)."""
    out = []
    dp = size.world // (lay.tp * lay.pp)
    for mb in searcher.micro_batches(dp):
        searcher.evaluated += 1
        searcher.calls += 1
        training, parallel = searcher.configs_of(lay, dp, mb, size.nodes)
        try:
            est = estimate(searcher.model, training, parallel, gpu=size.est_gpu, interconnect=size.link,
                           train_tokens=searcher.tokens)
        except ValueError:
            out.append((None, False))
            continue
        ok = not est.unmodelled and searcher.fits(size, est)
        out.append((Candidate(size, lay, dp, mb, training.grad_accum, est) if ok else None, ok))
    return out


def _naive_frugal_fit(searcher: Searcher, size: Size, lay: Layout) -> bool:
    """Whether the layout fits at its smallest micro-batch with full checkpointing (a fresh
    estimator call: the naive loop has no memo)."""
    dp = size.world // (lay.tp * lay.pp)
    mbs = searcher.micro_batches(dp)
    if not mbs:
        return False
    least = "full" if "full" in searcher.options.checkpointing else lay.checkpointing
    searcher.calls += 1
    ga = searcher.workload.global_batch_sequences // (mbs[0] * dp)
    try:
        est = estimate(searcher.model, searcher.training(mbs[0], ga, least, lay.stack, lay.strategy.sharding),
                       searcher.parallel(lay.strategy, dp, lay.tp, lay.pp, lay.stack, size.nodes))
    except ValueError:
        return False
    return not est.unmodelled and searcher.fits(size, est)


def size_price(sku: SkuSpec, nodes: int, network: NetworkOptionSpec | None, nvme: NvmeOptionSpec | None,
               storage: StorageProviderSpec | None, storage_tb: int) -> Price:
    """The hourly price the configurator quotes for this size (``pricing.server_price``)."""
    return _size_price(sku.slug, sku.price_monthly_usd, sku.price_hourly_usd, nodes, network, nvme, storage,
                       storage_tb)


@lru_cache(maxsize=8192)  # by the prices alone (a SKU's stock changes all day): once per price list
def _size_price(sku: str, monthly: Decimal, hourly: Decimal, nodes: int, network: NetworkOptionSpec | None,
                nvme: NvmeOptionSpec | None, storage: StorageProviderSpec | None, storage_tb: int) -> Price:
    per_node = tuple(Priced(o.slug, o.price_monthly_usd) for o in (nvme, network) if o is not None)
    shared = (Priced(storage.slug, storage.price_per_tb_monthly_usd, quantity=storage_tb),) if storage else ()
    return server_price(nodes=nodes, server=Priced(sku, monthly, hourly), per_node=per_node, shared=shared)
