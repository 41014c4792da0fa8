"""recommend(): workload + goal + catalog -> ranked plans with explanations."""

from __future__ import annotations

from bisect import bisect_right
from dataclasses import replace
from decimal import Decimal

from portal.sizing.estimator import (
    ESTIMATOR_VERSION,
    ModelSpec,
    ParallelConfig,
    TrainingConfig,
    attention_for,
    estimate_memory,
    get_preset,
)
from portal.sizing.estimator.config import DORA_TP_REFUSAL

from . import explain, infra
from .catalog import CatalogData, NvmeOptionSpec, StorageProviderSpec
from .collector import collections_paused
from .memo import searcher_for
from .pareto import pareto_front, rank
from .plan import MemoryBreakdown, Plan, regime_overrides
from .regimes import REGIMES
from .search import Candidate, Miss, Searcher, Size, make_gpu, make_link, naive_best, size_price
from .stacks import Needs, family_of, missing, strategy_stacks
from .strategies import get_strategy
from .types import Goal, Point, Recommendation, Rejection, SearchOptions, Workload

MAX_REJECTIONS = 6  # smaller server sizes explained


def resolve_model(model: str | ModelSpec) -> ModelSpec:
    return model if isinstance(model, ModelSpec) else get_preset(model)


def _probe(model: ModelSpec, workload: Workload, catalog: CatalogData) -> tuple[int, int]:
    """Checkpoint sizes (for NVMe and the bucket), from estimator calls that do not depend on
    the layout; also validates the workload against the model (e.g. seq_len beyond learned
    positions) and that some GPU of the catalog supports its precision."""
    if not any(_supports(g, workload.precision) for g in catalog.gpus):
        raise ValueError(f"no GPU in the catalog supports precision={workload.precision!r}; pick bf16-mixed")
    tc = TrainingConfig(precision=workload.precision, optimizer=workload.optimizer, seq_len=workload.seq_len,
                        attention=workload.attention, finetune=workload.finetune,
                        lora_rank=workload.lora_rank or 16, use_dora=workload.use_dora,
                        **REGIMES["ddp"].adapter_knobs(model, workload.finetune))  # every stack's adapters
    states = [estimate_memory(model, tc, ParallelConfig(dp=2, sharding=sh)).checkpoint
              for sh in ("none", "zero3")]
    return max(c.full_state_bytes for c in states), max(c.model_only_bytes for c in states)


def _supports(gpu, precision: str) -> bool:
    if precision == "fp8":
        return bool(gpu.fp8_tflops)
    if precision == "fp32":
        return bool(gpu.fp32_tflops)
    return True


def build_sizes(workload: Workload, catalog: CatalogData, options: SearchOptions, nvme: NvmeOptionSpec | None,
                provider: StorageProviderSpec | None, storage_tb: int) -> list[Size]:
    single = infra.single_node_network(catalog.networks, workload.dataset_bytes)
    multi = infra.multi_node_networks(catalog.networks)
    sizes = []
    for sku in catalog.skus:
        gpu = catalog.gpu(sku.gpu_slug)
        if not _supports(gpu, workload.precision):
            continue
        est_gpu = make_gpu(gpu)  # one object per GPU model (cached)
        for nodes in sorted(set(options.node_counts)):
            for net in ((single,) if nodes == 1 else multi):
                price = size_price(sku, nodes, net, nvme, provider, storage_tb)
                sizes.append(Size(sku, gpu, nodes, net, est_gpu, make_link(sku, gpu, nodes, net),
                                  price.hourly, price.monthly))
    return sizes


def recommend(workload: Workload, goal: Goal, catalog: CatalogData,
              options: SearchOptions | None = None, *, exhaustive: bool = False) -> Recommendation:
    """Search the catalog for configurations that fit, and rank them by the goal.

    exhaustive=True runs the naive loop (every layout x micro-batch estimated, no pruning);
    it exists for the benchmark and the equivalence test and gives the same plans.
    """
    if not isinstance(workload, Workload) or not isinstance(goal, Goal):
        raise ValueError("recommend() takes a Workload and a Goal")
    if not isinstance(catalog, CatalogData):
        raise ValueError("recommend() takes the catalog as CatalogData (see portal.sizing.catalog_data)")
    with collections_paused():
        return _recommend(workload, goal, catalog, options or SearchOptions(), exhaustive)


def _recommend(workload: Workload, goal: Goal, catalog: CatalogData, options: SearchOptions,
               exhaustive: bool) -> Recommendation:
    model = resolve_model(workload.model)
    if workload.use_dora and 1 not in options.tp_sizes:
        raise ValueError(f"{DORA_TP_REFUSAL}: leave tensor parallelism to the recommender or set it to 1")
    # the plan says the attention its stack's transformers runs (eager for Gemma 2: no SDPA path)
    workload = replace(workload, attention=attention_for(model, workload.attention))
    full_state, model_only = _probe(model, workload, catalog)

    nvme_need = infra.nvme_need_bytes(workload, full_state, model_only)
    nvme, nvme_warning = infra.choose_nvme(catalog.nvme, nvme_need)
    provider = infra.choose_storage(catalog.storage)
    storage_tb = infra.storage_need_tb(full_state, model_only, catalog.checkpoints_kept)
    sizes = build_sizes(workload, catalog, options, nvme, provider, storage_tb)

    stacks = strategy_stacks(catalog.stack)
    if not any(s.data_parallel for s in stacks):
        raise ValueError("the catalog declares no training stack that can run a layout (stack options of"
                         " kind strategy with their capabilities); seed it (manage.py seed_catalog)")
    extras = dict(nvme=nvme, nvme_warning=nvme_warning, provider=provider, storage_tb=storage_tb,
                  checkpoint_bytes=full_state, checkpoints_kept=catalog.checkpoints_kept)
    if exhaustive:  # its own searcher: no memo from earlier requests
        searcher = Searcher(model, workload, options, stacks)
        states = []
        for size in sizes:
            st = searcher.start(size)
            st.best = naive_best(searcher, size)
            states.append(st)
        return _recommendation(searcher, states, sizes, workload, goal, catalog, model, extras)
    with searcher_for(model, workload, options, stacks, catalog.gpus) as searcher:
        states = _search(searcher, sizes)
        return _recommendation(searcher, states, sizes, workload, goal, catalog, model, extras)


def _recommendation(searcher: Searcher, states: list, sizes: list[Size], workload: Workload, goal: Goal,
                    catalog: CatalogData, model: ModelSpec, extras: dict) -> Recommendation:
    """Rank what the search found (states: one per size) and explain it."""
    options, stacks = searcher.options, searcher.stacks
    found: list[Candidate] = [st.best for st in states if st.best]
    misses: list[tuple[Size, Miss]] = [(st.size, st.miss) for st in states if not st.best and st.miss]
    if not found:
        raise ValueError(_nothing_fits(model, misses, workload, stacks))

    def t(c):
        return c.train_seconds

    def c(x):
        return x.price_total_usd

    front = pareto_front(found, t, c)
    ranked, goal_met, delivery = _deliverable_first(found, front, goal, t, c)
    ranked = _each_once(ranked)
    plans = tuple(_plan(x, workload, catalog, model, extras, searcher) for x in ranked[: options.top_n])
    best = plans[0]
    on_front = {id(x) for x in front}
    point_of = {id(x): Point(x.size.sku.slug, x.size.gpu.slug, x.size.nodes, x.layout.strategy.name,
                             x.layout.tp, x.layout.pp, x.micro_batch, x.layout.checkpointing, x.train_hours,
                             x.price_total_usd, x.estimate.per_gpu.total, id(x) in on_front)
                for x in found}
    points = tuple(point_of[id(x)] for x in sorted(found, key=lambda x: (x.train_seconds, x.price_total_usd)))
    other = [point_of[id(x)] for x in _other_gpus(found, ranked[0], goal)]
    rejections = _rejections(misses, ranked[0])
    data = infra.data_advice(workload, ranked[0].size.sku, ranked[0].size.nodes, ranked[0].size.network)
    network_warning = infra.network_warning(workload.dataset_bytes, ranked[0].size.network)
    warnings = tuple(w for w in (extras["nvme_warning"], network_warning) if w)
    return Recommendation(
        goal=goal, goal_met=goal_met, plans=plans,
        explanations=(explain.why(best, goal, goal_met, get_strategy(best.strategy).label),
                      *((delivery,) if delivery else ()), *(r.message for r in rejections)),
        alternatives=_alternatives(front, ranked, options.top_n, best, other_gpus=_other_gpus(
            found, ranked[0], goal), point_of=point_of, plan_of=lambda x: _plan(
                x, workload, catalog, model, extras, searcher), sku_name=lambda s: catalog.sku(s).name),
        other_gpus=tuple(other),
        rejections=rejections, points=points, data=data, warnings=warnings,
        candidates_evaluated=searcher.evaluated, estimator_calls=searcher.calls,
        stats={"sizes": len(sizes), "feasible_sizes": len(found), "pareto": len(front)},
    )


def _other_gpus(found: list[Candidate], chosen: Candidate, goal: Goal) -> list[Candidate]:
    """Honest alternatives: the same job on each other GPU family, its best by the goal, cheapest
    first (so the customer sees what the chosen GPU buys)."""
    def t(x):
        return x.train_seconds

    def c(x):
        return x.price_total_usd

    by_gpu: dict[str, list[Candidate]] = {}
    for x in found:
        if x.size.gpu.slug != chosen.size.gpu.slug:
            by_gpu.setdefault(x.size.gpu.slug, []).append(x)
    picks = [rank(pareto_front(group, t, c), goal, t, c, lambda x: x.train_hours)[0][0]
             for group in by_gpu.values()]
    return sorted(picks, key=lambda x: (x.price_total_usd, x.train_seconds))


def ready(x: Candidate) -> bool:
    """Enough ready nodes in stock for the size (unknown stock, a catalog without inventory, counts)."""
    stock = x.size.sku.stock_nodes
    return stock is None or stock >= x.size.nodes


def _deliverable_first(found: list[Candidate], front: list[Candidate], goal: Goal, t, c):
    """Rank by the goal among what can be delivered now; plans needing more nodes than are ready
    follow ("on request"), unless only they meet the goal's deadline or budget. Returns the ranked
    candidates, whether the goal is met, and a sentence saying why when stock changed the order."""
    def hours(x):
        return x.train_hours

    ranked, goal_met = rank(front, goal, t, c, hours)
    if ready(ranked[0]):
        return ranked, goal_met, ""
    waiting = ranked[0]
    short = (f"{waiting.size.nodes} × " * (waiting.size.nodes > 1) + f"{waiting.size.sku.name} would be "
             f"{_verdict(goal)}, but it needs "
             f"{waiting.size.nodes} node(s) and {waiting.size.sku.stock_nodes} are ready")
    deliverable = [x for x in found if ready(x)]
    if deliverable:
        now, now_met = rank(pareto_front(deliverable, t, c), goal, t, c, hours)
        if now_met or not goal_met:
            later = [x for x in ranked if not ready(x)]
            return now + later, now_met, f"{short}: it is listed after the plans ready now, on request."
    return ranked, goal_met, (f"{short}: only it meets your {goal.kind}, so it comes first, on request;"
                              " staff confirm when the nodes are free.")


def _verdict(goal: Goal) -> str:
    return {"fastest": "faster", "cheapest": "cheaper", "deadline": "cheaper within your deadline",
            "budget": "faster within your budget"}[goal.kind]


def _search(searcher: Searcher, sizes: list[Size]) -> list:
    """First a fitting configuration for every size (a feasible point each), then branch and
    bound per size, stopped early once the size's remaining bound cannot reach the Pareto front
    formed by the other sizes."""
    states = [searcher.start(size) for size in sizes]
    # larger GPUs first: a class of sizes where nothing fits tells the smaller ones of the same
    # world size that nothing fits them either (Searcher._known_misses); the order changes no result
    for st in sorted(states, key=lambda st: (-st.size.usable_bytes, -st.size.host_ram_bytes)):
        searcher.advance(st)
    live = sorted((st for st in states if st.best), key=lambda st: st.best.train_seconds)

    def time(x):
        return x.train_seconds

    def cost(x):
        return x.price_total_usd

    front = pareto_front([st.best for st in live], time, cost)
    points = [(p.train_seconds, p.price_total_usd, p) for p in front]
    times = [pt for pt, _, _ in points]
    for st in live:
        own = st.best

        def dominated(t: float, cost, own=own, points=points, times=times) -> bool:
            # the front is fastest first with falling cost: of its points no slower than t, the
            # last is the cheapest (the one before it when it is the size's own point); cost(t)
            # is the size's price for that time, asked only when some point is that fast
            k = bisect_right(times, t) - 1
            if k >= 0 and points[k][2] is own:
                k -= 1
            if k < 0:
                return False
            pt, pc, _ = points[k]
            c = cost(t)
            return pc <= c and (pt < t or pc < c)

        searcher.advance(st, dominated)
        if st.best is not own:
            front = pareto_front([*front, st.best], time, cost)
            points = [(p.train_seconds, p.price_total_usd, p) for p in front]
            times = [pt for pt, _, _ in points]
    return states


def _plan(x: Candidate, workload: Workload, catalog: CatalogData, model: ModelSpec, extras: dict,
          searcher: Searcher) -> Plan:
    size, lay, est = x.size, x.layout, x.estimate
    training, parallel = searcher.configs_of(lay, x.dp, x.micro_batch, size.nodes)
    regime = regime_overrides(training, parallel, checkpointing=lay.checkpointing,
                              attention=workload.attention, precision=workload.precision)
    m = est.per_gpu
    stack = infra.stack_config(lay.strategy, lay.stack, tp=lay.tp, pp=lay.pp, micro_batch=x.micro_batch,
                               grad_accum=x.grad_accum, checkpointing=lay.checkpointing,
                               workload=workload, catalog=catalog)
    warnings = []
    availability = "unknown" if size.sku.stock_nodes is None else "ready" if ready(x) else "on-request"
    if availability == "on-request":
        needed = f"{size.nodes} nodes of {size.sku.name}" if size.nodes > 1 else f"one {size.sku.name}"
        warnings.append(f"on request: needs {needed}, {size.sku.stock_nodes} ready in stock; staff "
                        "confirm an ETA before approval")
    if size.network and size.network.on_request:
        warnings.append(f"{size.network.name} is on request: staff check the fabric before approval")
    nvme, provider = extras["nvme"], extras["provider"]
    return Plan(
        model=model.name, model_spec=model, finetune=workload.finetune, precision=workload.precision,
        optimizer=workload.optimizer, attention=workload.attention, lora_rank=workload.lora_rank or 16,
        seq_len=workload.seq_len, global_batch_tokens=workload.global_batch_tokens,
        train_tokens=workload.tokens_to_train,
        sku=size.sku.slug, sku_name=size.sku.name, gpu=size.gpu.slug, gpu_name=size.gpu.name,
        gpus_per_node=size.sku.gpus_per_node, nodes=size.nodes, interconnect=size.sku.interconnect,
        network=size.network.slug if size.network else "", strategy=lay.strategy.name,
        sharding=lay.strategy.sharding, offload=lay.strategy.offload, tp=lay.tp, pp=lay.pp, dp=x.dp,
        ep=parallel.ep,
        micro_batch=x.micro_batch, grad_accum=x.grad_accum, checkpointing=lay.checkpointing,
        memory=MemoryBreakdown(m.weights, m.gradients, m.optimizer_states, m.activations, m.logits_and_loss,
                               m.gathered_buffers, m.framework_overhead, m.total, m.transient),
        gpu_memory_bytes=size.gpu.memory_bytes, usable_memory_bytes=size.usable_bytes,
        tokens_per_second=est.compute.tokens_per_second, step_seconds=est.compute.step_seconds,
        comm_seconds=est.compute.exposed_comm_seconds, train_hours=x.train_hours,
        price_hourly_usd=size.price_hourly_usd, price_total_usd=x.price_total_usd,
        nvme_option=nvme.slug if nvme else "", nvme_tb=nvme.size_tb if nvme else 0,
        raid=nvme.raid if nvme else "", storage_provider=provider.slug if provider else "",
        storage_tb=extras["storage_tb"], checkpoint_bytes=extras["checkpoint_bytes"],
        checkpoints_kept=extras["checkpoints_kept"], stack=stack, mfu=x.mfu, cpu_bytes_per_node=est.cpu_bytes,
        training_regime=regime[0], parallel_regime=regime[1], represents=est.represents,
        time_model="estimator", estimator_version=ESTIMATOR_VERSION,
        warnings=tuple(warnings), availability=availability, billed_hours=x.billing.billed_hours,
        billing=x.billing.billing, price_per_month_usd=x.billing.per_month_usd or Decimal(0),
    )


def _dominated(x: Candidate, by: Candidate) -> bool:
    """``x`` is no faster and no cheaper than ``by``, and differs from it."""
    return (x.train_seconds >= by.train_seconds and x.price_total_usd >= by.price_total_usd
            and (x.train_seconds, x.price_total_usd) != (by.train_seconds, by.price_total_usd))


def _alternatives(front, ranked: list[Candidate], top_n: int, ref: Plan, *, other_gpus, point_of,
                  plan_of, sku_name) -> tuple[str, ...]:
    """The next cheaper and next faster plans of the front, then the best of each other GPU,
    against ``ref`` (the chosen plan). None is slower and dearer than the chosen plan, none is a
    plan listed above or twice."""
    chosen = ranked[0]
    shown = {_identity(x) for x in ranked[:top_n]}
    out = []
    cheaper = [x for x in front if x.price_total_usd < chosen.price_total_usd]
    faster = [x for x in front if x.train_seconds < chosen.train_seconds]
    for label, pool, key in (("Next cheaper", cheaper, lambda x: x.price_total_usd),
                             ("Next faster", faster, lambda x: x.train_seconds)):
        nxt = max(pool, key=key) if pool else None
        if nxt is not None and _identity(nxt) not in shown:
            shown.add(_identity(nxt))
            out.append(explain.alternative(label, plan_of(nxt), ref))
    for x in other_gpus:
        if _identity(x) in shown or _dominated(x, chosen):
            continue
        shown.add(_identity(x))
        p = point_of[id(x)]
        out.append(explain.other_gpu(p, ref, sku_name(p.sku)))
    return tuple(out)


def _each_once(ranked: list[Candidate]) -> list[Candidate]:
    seen, out = set(), []
    for x in ranked:
        if _identity(x) not in seen:
            seen.add(_identity(x))
            out.append(x)
    return out


def _identity(x: Candidate) -> tuple:
    """What a reader tells two plans apart by: server, nodes, network and layout."""
    lay = x.layout
    return (x.size.sku.slug, x.size.nodes, x.size.network.slug if x.size.network else "",
            lay.strategy.name, lay.tp, lay.pp, x.micro_batch, lay.checkpointing)


def _rejections(misses: list[tuple[Size, Miss]], chosen: Candidate) -> tuple[Rejection, ...]:
    """Server sizes smaller (fewer GPUs or cheaper per hour) than the chosen one that cannot run
    the job, closest to fitting first; one line per SKU and node count."""
    seen, out = set(), []
    smaller = [(s, m) for s, m in misses
               if s.world <= chosen.size.world or s.price_hourly_usd < chosen.size.price_hourly_usd]
    smaller.sort(key=lambda sm: (sm[0].nodes, -sm[0].world * sm[0].gpu.memory_bytes, sm[0].price_hourly_usd))
    for size, miss in smaller:
        key = (size.sku.slug, size.nodes)
        if key in seen:
            continue
        seen.add(key)
        message = _rejection_text(size, miss)
        out.append(Rejection(size.sku.slug, size.nodes, size.world, size.gpu.name, miss.needed_bytes,
                             size.usable_bytes, miss.strategy.name, message))
        if len(out) == MAX_REJECTIONS:
            break
    return tuple(out)


def _label(miss: Miss) -> str:
    label = miss.strategy.label
    if miss.tp > 1:
        label += f", TP {miss.tp}"
    if miss.pp > 1:
        label += f", PP {miss.pp}"
    return label


def _rejection_text(size: Size, miss: Miss) -> str:
    return explain.rejection(
        size.sku.gpus_per_node, size.gpu.name, size.gpu.memory_bytes, size.nodes, miss.needed_bytes,
        size.usable_bytes, _label(miss), miss.offload_cpu_bytes,
        miss.offload_strategy.label if miss.offload_strategy else "", size.host_ram_bytes)


def _nothing_fits(model: ModelSpec, misses: list[tuple[Size, Miss]], workload: Workload,
                  stacks: tuple) -> str:
    if not misses:
        if unrunnable := _no_stack_runs(model, workload, stacks):
            return f"no training stack in the catalog can run this job: {unrunnable}"
        return (f"no configuration in the catalog can train {model.name}: check the global batch"
                " (it must split over the data-parallel ranks) and the sequence length")
    size, miss = min(misses, key=lambda sm: sm[1].needed_bytes / sm[0].usable_bytes)
    return (f"no server in the catalog fits {model.name} with these settings; closest: "
            + _rejection_text(size, miss)
            + ". Try LoRA/QLoRA, a shorter sequence or more nodes")


def _no_stack_runs(model: ModelSpec, workload: Workload, stacks: tuple) -> str:
    """Each stack's lack for the job's own needs (fine-tuning, fp8, model family) at the simplest
    layout, "; "-joined; "" when a stack has them all (the layouts failed for another reason)."""
    needs = Needs(finetune=workload.finetune, fp8=workload.precision == "fp8", family=family_of(model))
    lacks = [(s.name, missing(s, needs)) for s in stacks]
    if any(not lack for _, lack in lacks):
        return ""
    return "; ".join(f"{name} has no {', '.join(lack)}" for name, lack in lacks)
