"""The search: server size (SKU x nodes x network) x strategy x TP x PP x checkpointing x micro-batch.

Every number comes from ``portal.sizing.estimator.estimate``; this module decides which
calls to make. For one server size the hourly price is fixed, so its cheapest and its fastest
configuration are the same one: the search finds the fastest fitting layout per size
(branch and bound), and the Pareto front is taken over sizes.

Pruning, none of which leaves out part of the search space:
- estimator results are memoised; memory does not depend on the GPU, so one memory estimate
  serves every SKU with the same world size;
- a time lower bound per (strategy, checkpointing) (compute only, at the layout's MFU, no
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
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from functools import cached_property

from portal.sizing.estimator import (
    Estimate,
    GPUSpec,
    Interconnect,
    MemoryEstimate,
    ModelSpec,
    ParallelConfig,
    TrainingConfig,
    estimate,
    estimate_from_memory,
    estimate_memory,
)

from .catalog import GpuSpec, NetworkOptionSpec, NvmeOptionSpec, SkuSpec, StorageProviderSpec
from .pricing import JobPrice, Price, Priced, billed_total_usd, job_price, server_price
from .stacks import Needs, choose_stack, family_of
from .strategies import STRATEGIES, Strategy, layout_supported, max_tp
from .types import SearchOptions, Workload

# The safety margin of GPU memory a plan leaves free (docs/sizing.md, "Safety margin"): what the
# estimator may under-count (its worst measured under-estimate: eager GPT-2 attention, ~8 %
# below CPU measurement; most published GPU runs it over-estimates) plus the allocator's
# fragmentation, NCCL buffers and evaluation spikes (~3 %), and never below 10 % of the GPU.
ESTIMATOR_UNDERCOUNT_FRACTION = 0.08
RUNTIME_SPIKE_FRACTION = 0.03
MIN_MEMORY_RESERVE_FRACTION = 0.10
MEMORY_RESERVE_FRACTION = max(MIN_MEMORY_RESERVE_FRACTION,
                              ESTIMATOR_UNDERCOUNT_FRACTION + RUNTIME_SPIKE_FRACTION)
HOST_RAM_RESERVE_FRACTION = 0.20  # of node RAM kept for the OS, DataLoader workers, page cache
REFERENCE_MATMUL_EFFICIENCY = 0.80  # H100 SXM: 794.5 of 989 TFLOPS, on which planning MFUs rest
# Achievable dense bf16 matmul / datasheet peak (shared/reference/gpu_specs.json, measured by
# stas00/ml-engineering). Parts without a measurement (Ada PCIe cards: power- and clock-limited
# under sustained tensor load) use DEFAULT_MATMUL_EFFICIENCY.
MATMUL_EFFICIENCY = {
    "a100-sxm": 271.2 / 312, "a100-pcie": 252.9 / 312, "h100-sxm": 794.5 / 989.4,
    "h200": 828.6 / 989.4, "b200": 1745.0 / 2250,
}
DEFAULT_MATMUL_EFFICIENCY = 0.70
PCIE_GBYTES_PER_S = {3: 16.0, 4: 32.0, 5: 64.0}  # per direction, x16
TIE = 1e-9  # relative tolerance when comparing times


def gpu_efficiency(gpu_slug: str) -> float:
    for prefix, eff in MATMUL_EFFICIENCY.items():
        if gpu_slug.startswith(prefix):
            return eff
    return DEFAULT_MATMUL_EFFICIENCY


@dataclass(frozen=True)
class Size:
    """One server size: a SKU, a node count and the network between (or into) the nodes."""

    sku: SkuSpec
    gpu: GpuSpec
    nodes: int
    network: NetworkOptionSpec | None
    est_gpu: GPUSpec
    link: Interconnect
    price_hourly_usd: float  # all nodes, GPUs + NVMe + network + storage
    price_monthly_usd: float = 0.0  # the same at the monthly rates

    def job_price(self, train_seconds: float) -> JobPrice:
        return job_price(hourly_usd=self.price_hourly_usd, monthly_usd=self.price_monthly_usd,
                         train_hours=train_seconds / 3600)

    def cost(self, train_seconds: float) -> float:
        """The billed total for a job of this length; never falls as the job gets longer."""
        return billed_total_usd(self.price_hourly_usd, self.price_monthly_usd, train_seconds / 3600)

    @property
    def world(self) -> int:
        return self.sku.gpus_per_node * self.nodes

    @property
    def usable_bytes(self) -> int:
        return int(self.gpu.memory_bytes * (1 - MEMORY_RESERVE_FRACTION))

    @property
    def host_ram_bytes(self) -> int:
        return int(self.sku.ram_bytes * (1 - HOST_RAM_RESERVE_FRACTION)) if self.sku.ram_bytes else 0

    @property
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
    return Interconnect(intra_node_gbps=intra, inter_node_gbit=inter, gpus_per_node=sku.gpus_per_node,
                        intra_kind=kind, inter_kind=network.kind if network else "none")


def make_gpu(gpu: GpuSpec) -> GPUSpec:
    return GPUSpec(name=gpu.name, memory_bytes=gpu.memory_bytes, bf16_tflops=gpu.bf16_tflops,
                   fp8_tflops=gpu.fp8_tflops, fp32_tflops=gpu.fp32_tflops,
                   memory_bandwidth_gbps=gpu.memory_bandwidth_gbytes_per_s)


@dataclass(frozen=True)
class Layout:
    strategy: Strategy
    tp: int
    pp: int
    checkpointing: str
    stack: str = ""  # slug of the catalog stack that runs it (stacks.choose_stack)


_LAYOUTS: dict[tuple, Layout] = {}  # the Layout value objects, made once per process


def _layout(s: Strategy, tp: int, pp: int, ckpt: str, stack: str) -> Layout:
    key = (s, tp, pp, ckpt, stack)
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
    mfu: float

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
    def price_total_usd(self) -> float:
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
    """Holds the memo of one recommendation; `best(size)` runs the branch and bound."""

    model: ModelSpec
    workload: Workload
    options: SearchOptions
    base_mfu: float
    hw_flops_per_token: dict[str, float]
    stacks: tuple = ()  # the catalog's strategy stacks (StackOptionSpec), in catalog order
    memory: dict = field(default_factory=dict)  # (strategy, dp, tp, pp, mb, ckpt) -> MemoryEstimate
    timed: dict = field(default_factory=dict)
    layout_cache: dict = field(default_factory=dict)
    configs: dict = field(default_factory=dict)  # TrainingConfig / ParallelConfig of this request
    mfus: dict = field(default_factory=dict)
    mb_cache: dict = field(default_factory=dict)
    groups: list | None = None  # (relative bound, strategy, checkpointing), in bound order
    scans: dict = field(default_factory=dict)
    calls: int = 0
    evaluated: int = 0

    def training(self, mb: int, ga: int, ckpt: str, mfu: float | None = None) -> TrainingConfig:
        key = (mb, ga, ckpt, mfu)
        tc = self.configs.get(key)
        if tc is None:
            w = self.workload
            tc = self.configs[key] = TrainingConfig(
                precision=w.precision, optimizer=w.optimizer, micro_batch=mb, seq_len=w.seq_len,
                grad_accum=ga, checkpointing=ckpt, attention=w.attention, finetune=w.finetune,
                lora_rank=w.lora_rank or 16, mfu=mfu)
        return tc

    def parallel(self, s: Strategy, dp: int, tp: int, pp: int) -> ParallelConfig:
        key = (s.sharding, s.offload, dp, tp, pp)
        pc = self.configs.get(key)
        if pc is None:
            pc = self.configs[key] = ParallelConfig(dp=dp, sharding=s.sharding, offload=s.offload, tp=tp,
                                                    pp=pp)
        return pc

    def mem(self, s: Strategy, dp: int, tp: int, pp: int, mb: int, ckpt: str) -> MemoryEstimate | None:
        """Memory estimate (no GPU: it serves every SKU with this layout), memoised; None when
        the estimator rejects the layout."""
        key = (s.name, dp, tp, pp, mb, ckpt)
        try:
            return self.memory[key]
        except KeyError:
            pass
        self.calls += 1
        ga = self.workload.global_batch_sequences // (mb * dp)
        try:
            est = estimate_memory(self.model, self.training(mb, ga, ckpt), self.parallel(s, dp, tp, pp))
        except ValueError:
            est = None
        self.memory[key] = est
        return est

    def time(self, size: Size, lay: Layout, dp: int, mb: int) -> tuple[Estimate, float]:
        """The estimate on this size's GPU and link: the memoised memory part plus the step time."""
        s = lay.strategy
        mfu = self.mfu(size, s)
        key = (size.gpu.slug, size.link, s.name, dp, lay.tp, lay.pp, mb, lay.checkpointing)
        est = self.timed.get(key)
        if est is None:
            self.calls += 1
            memory = self.mem(s, dp, lay.tp, lay.pp, mb, lay.checkpointing)
            est = self.timed[key] = estimate_from_memory(memory, size.est_gpu, size.link,
                                                         self.workload.tokens_to_train, mfu=mfu)
        return est, mfu

    def mfu(self, size: Size, s: Strategy) -> float:
        key = (size.gpu.slug, s.mfu_factor)
        value = self.mfus.get(key)
        if value is None:
            eff = gpu_efficiency(size.gpu.slug) / REFERENCE_MATMUL_EFFICIENCY
            value = self.mfus[key] = min(1.0, self.base_mfu * eff * s.mfu_factor)
        return value

    def fits(self, size: Size, est: Estimate | MemoryEstimate | None) -> bool:
        return _fits(est, size.usable_bytes, size.host_ram_bytes, size.sku.gpus_per_node)

    def scale(self, size: Size) -> float:
        """Seconds per unit of a layout's relative bound on this size: tokens / (GPUs x peak x MFU)."""
        peak = size.est_gpu.peak_tflops(self.workload.precision) * 1e12
        return self.workload.tokens_to_train / (size.world * peak * self.mfu(size, STRATEGIES[0])
                                                / STRATEGIES[0].mfu_factor)

    def layouts(self, size: Size) -> list[tuple[float, int, Layout]]:
        """Supported layouts of a size with their time lower bound (seconds), fastest first.

        The bound is tokens x hardware FLOPs per token / (GPUs x peak x MFU): the compute time
        alone. Its order depends only on the world size and the TP limit, so that is cached."""
        scale = self.scale(size)
        return [(rel * scale, order, lay) for rel, order, lay in self._layout_list(size)]

    def _layout_list(self, size: Size) -> list[tuple[float, int, Layout]]:
        key = (size.world, max_tp(size.sku.interconnect, size.sku.gpus_per_node))
        out = self.layout_cache.get(key)
        if out is None:
            out = self.layout_cache[key] = self._layouts(*key)
        return out

    def _layouts(self, world: int, tp_limit: int) -> list[tuple[float, int, Layout]]:
        """Layouts ordered by (relative bound, position in strategy x checkpointing x TP x PP)."""
        if self.groups is None:
            # (strategy, checkpointing) pairs by their relative bound; ties keep the nesting order,
            # and every layout of a pair shares its bound, so a world's list is the pairs' shapes
            # concatenated in this order (what sorting the nested loop's list by bound gives).
            names = self.options.strategies
            pairs = [(self.hw_flops_per_token[ckpt] / s.mfu_factor, s, ckpt) for s in STRATEGIES
                     if not names or s.name in names for ckpt in self.options.checkpointing]
            self.groups = sorted(pairs, key=lambda x: x[0])  # stable: ties stay in nesting order
        seqs = self.workload.global_batch_sequences
        tps = [t for t in self.options.tp_sizes if t <= tp_limit]
        shapes = {}
        for s in STRATEGIES:
            shapes[s] = [(tp, pp, stack) for tp in tps for pp in self.options.pp_sizes
                         if not world % (tp * pp) and layout_supported(s, tp, pp, world)
                         and not seqs % (world // (tp * pp)) and (stack := self.stack_of(s, tp, pp))]
        out = []
        for rel, s, ckpt in self.groups:
            for tp, pp, stack in shapes[s]:
                out.append((rel, len(out), _layout(s, tp, pp, ckpt, stack)))
        return out

    def stack_of(self, s: Strategy, tp: int, pp: int) -> str:
        """The slug of the stack that runs the strategy with this TP and PP for this workload
        ("" when no stack of the catalog declares all it needs: the layout is not proposed)."""
        key = ("stack", s.name, tp, pp)
        slug = self.configs.get(key)
        if slug is None:
            w = self.workload
            needs = Needs.of(sharding=s.sharding, offload=s.offload, tp=tp, pp=pp, finetune=w.finetune,
                             precision=w.precision, family=family_of(w.model))
            stack = choose_stack(needs, self.stacks, prefer=s.stack)
            slug = self.configs[key] = stack.slug if stack is not None else ""
        return slug

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
        usable GPU memory and host RAM (one SKU over each network; SKUs with the same GPU):
        it is decided once per class, when the first size gets that far in its walk, and
        layouts known not to fit are then skipped by every other size of the class."""
        key = (size.world, max_tp(size.sku.interconnect, size.sku.gpus_per_node), size.usable_bytes,
               size.host_ram_bytes, size.sku.gpus_per_node)
        sc = self.scans.get(key)
        if sc is None:
            layouts = self._layout_list(size)
            sc = self.scans[key] = Scan(layouts, size.world, size.usable_bytes, size.host_ram_bytes,
                                        size.sku.gpus_per_node,
                                        [None] * len(layouts), list(range(len(layouts) + 1)))
            self._pipeline_only_if_needed(sc)
        return sc

    def _pipeline_only_if_needed(self, sc: Scan) -> None:
        """Pipeline stages only when memory needs them: when a layout without a pipeline fits
        this class, its pipelined layouts are not proposed (the bubble, the stage imbalance and
        a harder launch for what the estimator may show as a small gain)."""
        flat = [lay for _, _, lay in sc.layouts if lay.pp == 1]
        if len(flat) == len(sc.layouts) or not any(self.frugal_fit(lay, sc.world, sc.usable, sc.host_ram,
                                                                    sc.gpus_per_node) for lay in flat):
            return
        for i, (_, _, lay) in enumerate(sc.layouts):
            if lay.pp > 1:
                sc.decided[i], sc.skip[i] = NO_FIT, i + 1

    def frugal_fit(self, lay: Layout, world: int, usable: int, host_ram: int, per_node: int) -> bool:
        """Whether the layout fits at its most frugal: the smallest micro-batch, full checkpointing."""
        dp = world // (lay.tp * lay.pp)
        mbs = self.micro_batches(dp)
        least = "full" if "full" in self.options.checkpointing else lay.checkpointing
        return bool(mbs) and _fits(self.mem(lay.strategy, dp, lay.tp, lay.pp, mbs[0], least),
                                   usable, host_ram, per_node)

    def decide(self, sc: Scan, i: int) -> tuple | None:
        """Whether layout i of a class fits: (dp, micro-batch to time, that is the smallest
        micro-batch) or None. Its smallest memory is at micro-batch 1 with full checkpointing;
        memory only grows with the micro-batch, so micro-batches stop at the first that does
        not fit."""
        _, _, lay = sc.layouts[i]
        usable, host_ram, per_node = sc.usable, sc.host_ram, sc.gpus_per_node
        s, tp, pp, ckpt = lay.strategy, lay.tp, lay.pp, lay.checkpointing
        dp = sc.world // (tp * pp)
        mbs = self.micro_batches(dp)
        pick, more = 0, ()
        if mbs:
            least = "full" if "full" in self.options.checkpointing else ckpt
            smallest = self.mem(s, dp, tp, pp, mbs[0], least)
            if not _fits(smallest, usable, host_ram, per_node):
                sc.decided[i] = smallest  # a MemoryEstimate (or None): kept for the closest miss
            elif pp > 1:
                # 1F1B: the bubble shrinks with more micro-batches per step, but each micro-batch
                # pays the estimator's per-stage overhead: every fitting micro-batch is timed.
                for mb in mbs:
                    if not _fits(self.mem(s, dp, tp, pp, mb, ckpt), usable, host_ram, per_node):
                        break
                    more = (*more, mb) if pick else ()
                    pick = pick or mb
            else:
                for mb in mbs:
                    if not _fits(self.mem(s, dp, tp, pp, mb, ckpt), usable, host_ram, per_node):
                        break
                    pick = mb
        if not pick:
            if sc.decided[i] is None:
                sc.decided[i] = NO_FIT
            sc.skip[i] = i + 1
            return None
        entry = sc.decided[i] = (dp, pick, pp == 1 or pick == mbs[0], more)
        return entry

    def closest_miss(self, sc: Scan) -> Miss | None:
        """Every layout of the class decided and none fits: the closest miss, in bound order."""
        if sc.miss is None:
            miss = None
            for (_, _, lay), smallest in zip(sc.layouts, sc.decided, strict=True):
                if isinstance(smallest, MemoryEstimate):
                    miss = _record_miss(miss, smallest, sc.usable, sc.gpus_per_node, lay)
            sc.miss = miss or NO_FIT
        return sc.miss if isinstance(sc.miss, Miss) else None

    def advance(self, st: SizeState, dominated=None) -> None:
        """Explore the size's layouts in bound order until the first fitting one (dominated is
        None) or, after that, until no remaining layout can beat the size's best or reach the
        Pareto front (dominated(seconds, usd) says another size already beats that point).

        Layouts that a size of the same class found not to fit are skipped: they give no
        candidate, and bounds only grow along the list (such a layout would stop the walk only
        where the next layout would stop it too)."""
        size = st.size
        sc = st.scan
        if sc is None:
            sc = st.scan = self.scan(size)
        layouts, decided, skip = sc.layouts, sc.decided, sc.skip
        scale, cost, n = st.scale, size.cost, len(layouts)
        i = _next(skip, st.next)
        while i < n:
            rel, _, lay = layouts[i]
            bound = rel * scale
            best = st.best
            if best is not None:
                if dominated is None or bound >= best.train_seconds * (1 - TIE):
                    st.next = i
                    return
                if dominated(bound, cost(bound)):
                    st.next = i
                    return
                known = st.exposed.get((lay.tp, lay.pp))
                if known is not None:
                    # Same TP/PP on this size timed before: its pipeline bubble and its TP/PP
                    # communication (exposed whatever the strategy) tighten this layout's bound.
                    bubble, fixed_seconds = known
                    tight = bound / (1 - bubble) + fixed_seconds
                    if tight >= best.train_seconds * (1 - TIE) or (
                            dominated and dominated(tight, cost(tight))):
                        i = _next(skip, i + 1)
                        continue
            entry = decided[i]
            if entry is None:
                entry = self.decide(sc, i)
            if type(entry) is tuple:
                self._run(st, lay, *entry)
            i = _next(skip, i + 1)
        st.next = n
        if st.best is None:
            st.miss = self.closest_miss(sc)

    def _run(self, st: SizeState, lay: Layout, dp: int, pick: int, first_mb: bool, more: tuple = ()) -> None:
        """Time a layout that fits at micro-batch `pick` (and at `more`); keep the size's fastest."""
        # Under a pipeline the step time is convex in the number of micro-batches (bubble
        # C*(p-1)/m against per-micro-batch overhead c*m), so it is unimodal over the
        # micro-batch sizes: stop at the first that is slower than the one before.
        last = self._time_one(st, lay, dp, pick, first_mb)
        for mb in more:
            t = self._time_one(st, lay, dp, mb, False)
            if t > last:
                break
            last = t

    def _time_one(self, st: SizeState, lay: Layout, dp: int, pick: int, first_mb: bool) -> float:
        size = st.size
        self.evaluated += 1
        est, mfu = self.time(size, lay, dp, pick)
        c = est.compute
        if first_mb:
            steps = self.workload.tokens_to_train / c.tokens_per_step
            always = c.comm_seconds["tp"] + c.comm_seconds["pp"] + c.comm_seconds["ep"]
            st.exposed.setdefault((lay.tp, lay.pp), (c.bubble_fraction, always * steps))
        if st.best is None or c.time_to_train_seconds < st.best.train_seconds * (1 - TIE):
            st.best = Candidate(size, lay, dp, pick, self.workload.global_batch_sequences // (pick * dp),
                                est, mfu)
        return c.time_to_train_seconds

    def best(self, size: Size) -> tuple[Candidate | None, Miss | None]:
        """The fastest fitting configuration of one size (full branch and bound)."""
        st = self.start(size)
        self.advance(st)
        self.advance(st, dominated=lambda t, c: False)
        return st.best, (None if st.best else st.miss)


# Ranks per node assumed by the pruned search's host-RAM check: the estimator's default link
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


@dataclass
class Scan:
    """Memory decisions for one class of sizes (Searcher.scan), made lazily per layout."""

    layouts: list  # (relative bound, order, layout), fastest first
    world: int
    usable: int
    host_ram: int
    gpus_per_node: int
    # per layout: None (not decided yet), (dp, micro-batch, is the smallest micro-batch, further
    # micro-batches to time under a pipeline) when
    # it fits, else its smallest MemoryEstimate (for the closest miss) or NO_FIT
    decided: list
    skip: list  # skip[i] == i unless layout i does not fit; then a later index (see _next)
    miss: Miss | str | None = None  # closest_miss(), once worked out


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
    exposed: dict = field(default_factory=dict)  # (tp, pp) -> (bubble, TP+PP comm seconds in all)


def naive_best(searcher: Searcher, size: Size) -> Candidate | None:
    """The same search space without pruning or memo: every layout x micro-batch is estimated
    (memory and time in one call). For the benchmark and the equivalence test."""
    best = None
    layouts = [lay for _, _, lay in searcher.layouts(size)]
    if any(lay.pp == 1 and _naive_frugal_fit(searcher, size, lay) for lay in layouts):
        layouts = [lay for lay in layouts if lay.pp == 1]  # pipeline stages only when memory needs them
    for lay in layouts:
        dp = size.world // (lay.tp * lay.pp)
        for mb in searcher.micro_batches(dp):
            searcher.evaluated += 1
            searcher.calls += 1
            ga = searcher.workload.global_batch_sequences // (mb * dp)
            mfu = searcher.mfu(size, lay.strategy)
            try:
                est = estimate(searcher.model, searcher.training(mb, ga, lay.checkpointing, mfu),
                               searcher.parallel(lay.strategy, dp, lay.tp, lay.pp), gpu=size.est_gpu,
                               interconnect=size.link, train_tokens=searcher.workload.tokens_to_train)
            except ValueError:
                continue
            if not searcher.fits(size, est):
                continue
            cand = Candidate(size, lay, dp, mb, ga, est, mfu)
            if best is None or cand.train_seconds < best.train_seconds * (1 - TIE):
                best = cand
    return best


def _naive_frugal_fit(searcher: Searcher, size: Size, lay: Layout) -> bool:
    """Searcher.frugal_fit with a fresh estimator call (the naive loop has no memo)."""
    dp = size.world // (lay.tp * lay.pp)
    mbs = searcher.micro_batches(dp)
    if not mbs:
        return False
    least = "full" if "full" in searcher.options.checkpointing else lay.checkpointing
    searcher.calls += 1
    try:
        est = estimate(searcher.model, searcher.training(mbs[0], searcher.workload.global_batch_sequences
                                                         // (mbs[0] * dp), least),
                       searcher.parallel(lay.strategy, dp, lay.tp, lay.pp))
    except ValueError:
        return False
    return searcher.fits(size, est)


def size_price_hourly(sku: SkuSpec, nodes: int, network: NetworkOptionSpec | None,
                      nvme: NvmeOptionSpec | None, storage: StorageProviderSpec | None,
                      storage_tb: int) -> float:
    return float(size_price(sku, nodes, network, nvme, storage, storage_tb).hourly)


def size_price(sku: SkuSpec, nodes: int, network: NetworkOptionSpec | None, nvme: NvmeOptionSpec | None,
               storage: StorageProviderSpec | None, storage_tb: int) -> Price:
    """The hourly price the configurator quotes for this size (``pricing.server_price``)."""
    per_node = tuple(Priced(o.slug, o.price_monthly_usd) for o in (nvme, network) if o is not None)
    shared = (Priced(storage.slug, storage.price_per_tb_monthly_usd, quantity=storage_tb),) if storage else ()
    price = server_price(nodes=nodes, server=Priced(sku.slug, sku.price_monthly_usd, sku.price_hourly_usd),
                         per_node=per_node, shared=shared)
    return price
