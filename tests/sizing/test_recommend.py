"""Recommender on the real seeded catalog (from the seed JSON, no database)."""

import re
from dataclasses import replace
from decimal import Decimal

import pytest

from portal.sizing.catalog_data import catalog_from_seed
from portal.sizing.estimator import estimate, get_preset
from portal.sizing.recommend import (
    MEMORY_RESERVE_FRACTION,
    CatalogData,
    Goal,
    SearchOptions,
    Workload,
    recommend,
)
from portal.sizing.recommend.engine import build_sizes
from portal.sizing.recommend.memo import forget_searches
from portal.sizing.recommend.search import Searcher

PLAN_KEYS = {
    "model", "finetune", "precision", "sku", "gpu", "gpu_name", "gpus_per_node", "nodes", "interconnect",
    "network", "strategy", "tp", "pp", "micro_batch", "grad_accum", "checkpointing", "per_gpu_total_bytes",
    "gpu_memory_bytes", "memory_breakdown_bytes", "tokens_per_second", "train_hours", "price_hourly_usd",
    "price_total_usd", "nvme_tb", "raid", "storage_tb", "stack",
}
BREAKDOWN_KEYS = {"weights", "gradients", "optimizer_states", "activations", "logits_and_loss",
                  "gathered_buffers", "framework_overhead"}


@pytest.fixture(scope="module")
def catalog():
    return catalog_from_seed()


def full_7b(**kw):
    return Workload(model="mistral-7b", finetune="full", precision="bf16-mixed", optimizer="adamw",
                    seq_len=4096, global_batch_tokens=4096 * 256, dataset_tokens=1_000_000_000,
                    dataset_bytes=4 * 10**9, dataset_files=1000, **kw)


@pytest.fixture(scope="module")
def rec_7b_cheapest(catalog):
    return recommend(full_7b(), Goal("cheapest"), catalog, SearchOptions(top_n=20))


@pytest.fixture(scope="module")
def rec_7b_fastest(catalog):
    return recommend(full_7b(), Goal("fastest"), catalog, SearchOptions(top_n=20))


def estimator_total(plan) -> int:
    """The plan re-estimated from its own fields and its stack's regime (the estimator knobs it
    stores), from scratch: a fresh estimate(), not the search's memo."""
    return estimate(get_preset("mistral-7b"), plan.training_config(), plan.parallel_config()).per_gpu.total


def test_7b_full_finetune_never_recommends_what_the_estimator_says_does_not_fit(rec_7b_cheapest,
                                                                                rec_7b_fastest):
    for rec in (rec_7b_cheapest, rec_7b_fastest):
        assert rec.plans
        for plan in rec.plans:
            total = estimator_total(plan)
            assert total == plan.memory.total
            assert total <= plan.gpu_memory_bytes * (1 - MEMORY_RESERVE_FRACTION)
            assert plan.headroom_bytes >= 0
            assert plan.dp * plan.tp * plan.pp == plan.gpus
            assert plan.micro_batch * plan.grad_accum * plan.dp * 4096 == 4096 * 256
        for point in rec.points:
            assert point.per_gpu_total_bytes <= 180e9 * (1 - MEMORY_RESERVE_FRACTION)


def test_every_feasible_point_fits_its_gpu(catalog, rec_7b_cheapest):
    memory = {g.slug: g.memory_bytes for g in catalog.gpus}
    assert len(rec_7b_cheapest.points) > 50
    for p in rec_7b_cheapest.points:
        assert p.per_gpu_total_bytes <= memory[p.gpu] * (1 - MEMORY_RESERVE_FRACTION)
    assert sum(p.pareto for p in rec_7b_cheapest.points) >= 2


def test_one_gbit_never_appears_in_a_multi_node_plan(catalog, rec_7b_fastest):
    networks = {n.slug: n for n in catalog.networks}
    multi = [p for p in rec_7b_fastest.plans if p.nodes > 1]
    assert multi
    for plan in multi:
        assert networks[plan.network].kind == "infiniband"
        assert plan.network != "eth-1g"
    for size in build_sizes(full_7b(), catalog, SearchOptions(), None, None, 0):
        if size.nodes > 1:
            assert size.network.speed_gbit_per_s > 1 and size.network.kind == "infiniband"


def test_cheapest_and_fastest_differ(rec_7b_cheapest, rec_7b_fastest):
    cheap, fast = rec_7b_cheapest.best, rec_7b_fastest.best
    assert (cheap.sku, cheap.nodes) != (fast.sku, fast.nodes)
    assert cheap.price_total_usd < fast.price_total_usd
    assert fast.train_hours < cheap.train_hours


def test_plans_are_the_pareto_front_ranked_by_goal(rec_7b_cheapest, rec_7b_fastest):
    costs = [p.price_total_usd for p in rec_7b_cheapest.plans]
    assert costs == sorted(costs)
    hours = [p.train_hours for p in rec_7b_fastest.plans]
    assert hours == sorted(hours)
    for plan in rec_7b_cheapest.plans:  # nobody beats a front plan on both
        assert not any(p.train_hours < plan.train_hours and p.price_total_usd < plan.price_total_usd
                       for p in rec_7b_cheapest.points)


def test_deadline_and_budget_goals(catalog, rec_7b_cheapest, rec_7b_fastest):
    cheap = rec_7b_cheapest.best
    deadline = cheap.train_hours / 2
    rec = recommend(full_7b(), Goal("deadline", deadline_hours=deadline), catalog)
    assert rec.goal_met and rec.best.train_hours <= deadline
    budget = rec_7b_fastest.best.price_total_usd * Decimal("0.99")
    rec = recommend(full_7b(), Goal("budget", budget_usd=budget), catalog)
    assert rec.goal_met and rec.best.price_total_usd <= budget
    rec = recommend(full_7b(), Goal("deadline", deadline_hours=0.001), catalog)
    assert not rec.goal_met and "is the fastest configuration, though none finishes within 1 min:" \
        in rec.explanations[0]
    rec = recommend(full_7b(), Goal("budget", budget_usd=1), catalog)
    assert not rec.goal_met and "is the cheapest configuration, though none fits your budget of " \
        "$1.00:" in rec.explanations[0]


def test_70b_pretraining_goes_multi_node_with_infiniband(catalog):
    work = Workload(model="llama-3.1-70b", finetune="full", seq_len=4096, global_batch_tokens=4096 * 1024,
                    dataset_tokens=200_000_000_000, dataset_bytes=800 * 10**9, dataset_files=400_000)
    rec = recommend(work, Goal("deadline", deadline_hours=24 * 30), catalog)
    plan = rec.best
    assert rec.goal_met
    assert plan.nodes > 1
    assert plan.network.startswith("ib-")
    assert plan.stack.slug in ("fsdp", "deepspeed", "torchtitan")  # sharded: 70B does not fit DDP
    assert plan.train_hours <= 24 * 30


def test_rejected_smaller_configuration_is_explained(catalog, rec_7b_cheapest):
    assert rec_7b_cheapest.rejections
    text = "\n".join(rec_7b_cheapest.explanations)
    assert re.search(r"\d+× [\w .-]+ \d+ GB: needs \d+\.\d GB per GPU with [\w +(),-]+"
                     r" \(\d+\.\d GB usable\)", text)
    for r in rec_7b_cheapest.rejections:
        assert r.needed_bytes > r.usable_bytes or "host RAM" in r.message
        assert r.message in rec_7b_cheapest.explanations


def test_explanations_name_the_plan_and_alternatives(rec_7b_cheapest):
    why = rec_7b_cheapest.explanations[0]
    assert "cheapest" in why and "tokens/s" in why and "GB" in why and "$" in why
    # The next faster plan is named, unless it is already among the plans listed (never twice).
    faster_listed = any(p.train_hours < rec_7b_cheapest.best.train_hours for p in rec_7b_cheapest.plans)
    assert faster_listed or any(a.startswith("Next faster") for a in rec_7b_cheapest.alternatives)


def test_plan_json_contract(rec_7b_cheapest):
    d = rec_7b_cheapest.best.to_dict()
    assert PLAN_KEYS <= set(d)
    assert BREAKDOWN_KEYS <= set(d["memory_breakdown_bytes"])
    assert sum(d["memory_breakdown_bytes"].values()) == d["per_gpu_total_bytes"]
    assert d["stack"] in ("ddp", "fsdp", "deepspeed", "torchtitan")
    assert d["raid"] in ("single", "raid0", "raid10") and d["nvme_tb"] >= 1 and d["storage_tb"] >= 1
    full = rec_7b_cheapest.to_dict()
    assert full["plans"][0] == d and full["points"] and full["data"]["dataloader_workers"] >= 2


def test_nvme_holds_dataset_and_checkpoints(rec_7b_cheapest):
    plan = rec_7b_cheapest.best
    # mistral-7b: ~7.2B params, full state >= 12 B/param, two kept locally, plus the dataset.
    assert plan.nvme_tb * 1e12 >= 2 * 12 * 7.2e9 + 4e9


def test_pruned_search_finds_the_same_front_as_the_exhaustive_loop(catalog):
    small = CatalogData(gpus=catalog.gpus, skus=tuple(s for s in catalog.skus if s.slug in (
        "4x-l40s-48gb", "8x-h100-sxm-80gb", "2x-h100-nvl-94gb", "1x-a100-pcie-80gb")),
        nvme=catalog.nvme, networks=catalog.networks, storage=catalog.storage, stack=catalog.stack)
    work = replace(full_7b(), model="llama-2-7b")
    options = SearchOptions(node_counts=(1, 2, 4))
    fast = recommend(work, Goal("cheapest"), small, options)
    slow = recommend(work, Goal("cheapest"), small, options, exhaustive=True)
    assert [(p.sku, p.nodes) for p in fast.plans] == [(p.sku, p.nodes) for p in slow.plans]
    for a, b in zip(fast.plans, slow.plans, strict=True):
        assert a.train_hours == pytest.approx(b.train_hours, rel=1e-9)
        assert a.price_total_usd == pytest.approx(b.price_total_usd, rel=Decimal("1e-9"))
    assert fast.estimator_calls < slow.estimator_calls


def test_lora_needs_less_than_full(catalog):
    lora = recommend(replace(full_7b(), finetune="lora"), Goal("cheapest"), catalog)
    full = recommend(full_7b(), Goal("cheapest"), catalog)
    assert lora.best.price_total_usd < full.best.price_total_usd


@pytest.mark.parametrize("kwargs, message", [
    ({"model": "llama-9000"}, "unknown model preset"),
    ({"finetune": "prefix"}, "finetune="),
    ({"precision": "int4"}, "precision="),
    ({"global_batch_tokens": 5000}, "not a multiple of seq_len"),
    ({"dataset_tokens": 0}, "nothing to train"),
    ({"seq_len": 0}, "seq_len must be"),
    ({"dataset_tokens": 10**400}, "dataset_tokens must be at most"),  # float(int): OverflowError
    ({"epochs": 1e300}, "epochs must be a number from 0 to 1,000"),  # was int(inf): OverflowError
    ({"dataset_tokens": 10**16, "epochs": 1000}, "tokens to train"),
])
def test_bad_workload_input_errors(catalog, kwargs, message):
    base = {"model": "mistral-7b", "dataset_tokens": 10**9, "seq_len": 4096, "global_batch_tokens": 4096 * 64}
    with pytest.raises(ValueError, match=message):
        recommend(Workload(**{**base, **kwargs}), Goal("cheapest"), catalog)


def test_an_unknown_strategy_is_named_not_reported_as_nothing_fitting():
    with pytest.raises(ValueError, match="unknown strategy 'zero4'"):
        SearchOptions(strategies=("zero4",))


def test_bad_goal_and_catalog_errors(catalog):
    with pytest.raises(ValueError, match="deadline_hours"):
        Goal("deadline")
    with pytest.raises(ValueError, match="budget_usd"):
        Goal("budget", budget_usd=-1)
    with pytest.raises(ValueError, match="goal="):
        Goal("cheap")
    with pytest.raises(ValueError, match="no active server SKUs"):
        CatalogData(gpus=catalog.gpus, skus=())
    with pytest.raises(ValueError, match="CatalogData"):
        recommend(full_7b(), Goal("cheapest"), {"skus": []})


def test_nothing_fits_says_what_was_closest(catalog):
    l4 = tuple(s for s in catalog.skus if s.slug == "1x-l4-24gb")
    tiny = CatalogData(gpus=catalog.gpus, skus=l4, nvme=catalog.nvme, networks=catalog.networks,
                       storage=catalog.storage, stack=catalog.stack)
    work = Workload(model="llama-3.1-70b", dataset_tokens=10**9, seq_len=4096, global_batch_tokens=4096 * 64)
    with pytest.raises(ValueError, match=r"no server in the catalog fits llama-3.1-70b.*needs|host RAM"):
        recommend(work, Goal("cheapest"), tiny, SearchOptions(node_counts=(1,)))


SHARED_GPU_SKUS = ("1x-a100-pcie-80gb", "4x-a100-pcie-80gb", "8x-a100-pcie-80gb", "4x-rtx-4090-24gb",
                   "8x-rtx-4090-24gb", "2x-h100-nvl-94gb", "8x-h100-sxm-80gb")


@pytest.mark.parametrize("work", [
    replace(full_7b(), model="llama-3.1-8b", finetune="lora"),
    replace(full_7b(), model="gpt2-1.5b", seq_len=1024, global_batch_tokens=1024 * 512),
    replace(full_7b(), model="llama-3.1-70b", finetune="qlora", global_batch_tokens=4096 * 128),
], ids=["8b-lora", "gpt2-full", "70b-qlora"])
def test_pruned_search_matches_exhaustive_with_sizes_sharing_memory(catalog, work):
    """Sizes with the same GPU memory, world size and host RAM share their memory decisions
    (one SKU over every network; several SKUs with the same GPU): still the exhaustive result."""
    small = CatalogData(gpus=catalog.gpus, skus=tuple(s for s in catalog.skus if s.slug in SHARED_GPU_SKUS),
                        nvme=catalog.nvme, networks=catalog.networks, storage=catalog.storage,
                        stack=catalog.stack)
    options = SearchOptions(node_counts=(1, 2, 4), top_n=10)
    for goal in (Goal("cheapest"), Goal("fastest")):
        fast = recommend(work, goal, small, options)
        slow = recommend(work, goal, small, options, exhaustive=True)
        assert [(p.sku, p.nodes, p.network) for p in fast.plans] == [
            (p.sku, p.nodes, p.network) for p in slow.plans]
        for a, b in zip(fast.plans, slow.plans, strict=True):  # ties may differ in micro-batch
            assert a.train_hours == pytest.approx(b.train_hours, rel=1e-9)
            assert a.price_total_usd == pytest.approx(b.price_total_usd, rel=Decimal("1e-9"))
        # the bounds, the shared memory decisions and the lighter-sibling rule prune most calls
        assert fast.estimator_calls < slow.estimator_calls / 10


@pytest.mark.parametrize("work, catalog_skus", [
    (replace(full_7b(), model="llama-3.1-70b"), None),  # the whole catalog: many GPU memory sizes
    (Workload(model="llama-3.1-70b", dataset_tokens=10**9, seq_len=4096, global_batch_tokens=4096 * 64),
     ("1x-l4-24gb", "1x-rtx-4090-24gb", "2x-rtx-4090-24gb", "1x-l40s-48gb", "1x-a100-pcie-80gb")),
], ids=["70b-full", "70b-nothing-fits"])
def test_misses_inherited_from_classes_with_more_memory_change_nothing(catalog, monkeypatch, work,
                                                                        catalog_skus):
    """A layout whose most frugal setting did not fit a class with more GPU memory (and host
    RAM) is not decided again for a class with less: the whole answer, points, rejections and
    closest miss included, is the one every class deciding afresh gives."""
    if catalog_skus:
        skus = tuple(s for s in catalog.skus if s.slug in catalog_skus)
        catalog = CatalogData(gpus=catalog.gpus, skus=skus,
                              nvme=catalog.nvme, networks=catalog.networks, storage=catalog.storage,
                              stack=catalog.stack)

    def answer():
        forget_searches()  # each answer searches afresh
        try:
            return recommend(work, Goal("cheapest"), catalog, SearchOptions(node_counts=(1, 2))).to_dict()
        except ValueError as exc:
            return str(exc)

    inherited = answer()
    monkeypatch.setattr(Searcher, "_ancestors", lambda self, *args: ())
    assert answer() == inherited
    if catalog_skus:
        assert inherited.startswith("no server in the catalog fits") and "closest: " in inherited


def test_offload_verdict_inherited_from_classes_with_more_memory_changes_nothing(catalog, monkeypatch):
    """A class that no layout without offload fits tells the classes of its world size with less
    GPU memory, host RAM and TP limit; the answer is the one every class checking afresh gives,
    and the inheritance is used (fewer frugal checks)."""
    work = replace(full_7b(), model="llama-3.1-70b")
    checks = []
    frugal_fit = Searcher.frugal_fit

    def counted(self, *args):
        checks.append(args)
        return frugal_fit(self, *args)

    def answer():
        forget_searches()
        checks.clear()
        return _answer(recommend(work, Goal("cheapest"), catalog)), len(checks)

    monkeypatch.setattr(Searcher, "frugal_fit", counted)
    inherited, inherited_checks = answer()
    # every class starts from no known verdict (a fresh dict each time it is read)
    monkeypatch.setattr(Searcher, "offload_needed", property(lambda self: {}, lambda self, value: None),
                        raising=False)
    try:
        afresh, afresh_checks = answer()
    finally:
        forget_searches()  # its searcher has no offload_needed of its own once the patch is undone
    assert afresh == inherited
    assert inherited_checks < afresh_checks


def test_recommendation_does_not_depend_on_estimator_caches(catalog):
    from portal.sizing.estimator import clear_caches

    work = replace(full_7b(), finetune="qlora", model="llama-3.1-70b")
    warm = recommend(work, Goal("cheapest"), catalog).to_dict()
    forget_searches()
    clear_caches()
    assert recommend(work, Goal("cheapest"), catalog).to_dict() == warm


def _answer(rec) -> dict:
    """A recommendation without the work counters (a kept searcher calls the estimator less)."""
    return {k: v for k, v in rec.to_dict().items() if k not in ("estimator_calls", "candidates_evaluated")}


@pytest.mark.parametrize("preset, seq", [("gpt2-1.5b", 1024), ("llama-3.1-8b", 4096), ("llama-3.1-70b", 4096),
                                         ("mixtral-8x7b", 4096)])
def test_a_searcher_kept_from_another_request_of_the_shape_answers_as_a_new_one(catalog, preset, seq):
    """The memo kept between requests (memo.py) holds nothing that depends on the tokens or the
    goal: a request of the same shape with other tokens and another goal gets the answer a new
    searcher gives, and does fewer estimator calls."""
    first = replace(full_7b(), model=preset, seq_len=seq, global_batch_tokens=seq * 256,
                    dataset_tokens=2 * 10**9)
    later = replace(first, dataset_tokens=7 * 10**10, epochs=2.0)
    forget_searches()
    recommend(first, Goal("cheapest"), catalog)
    kept = recommend(later, Goal("fastest"), catalog)
    forget_searches()
    new = recommend(later, Goal("fastest"), catalog)
    assert _answer(kept) == _answer(new)
    assert kept.estimator_calls < new.estimator_calls


def test_searchers_are_kept_per_shape_and_per_catalog_gpus(catalog):
    """Another sequence length is another shape; a GPU whose figures changed is another catalog."""
    from portal.sizing.recommend import memo

    forget_searches()
    work = full_7b()
    recommend(work, Goal("cheapest"), catalog)
    recommend(replace(work, dataset_tokens=work.dataset_tokens * 3), Goal("fastest"), catalog)
    assert len(memo._kept) == 1
    recommend(replace(work, seq_len=2048, global_batch_tokens=2048 * 256), Goal("cheapest"), catalog)
    assert len(memo._kept) == 2
    faster = tuple(replace(g, bf16_tflops=g.bf16_tflops * 2) for g in catalog.gpus)
    doubled = recommend(work, Goal("fastest"), replace(catalog, gpus=faster))
    assert len(memo._kept) == 3
    # every configuration runs faster on the doubled GPUs (the cheapest may move to another SKU)
    assert doubled.plans[0].train_hours < recommend(work, Goal("fastest"), catalog).plans[0].train_hours


def test_a_request_that_finds_the_searcher_in_use_searches_with_its_own(catalog):
    """Two requests of one shape at once never share a searcher (the second builds its own)."""
    from portal.sizing.recommend.memo import searcher_for

    forget_searches()
    work = full_7b()
    model = get_preset(work.model)
    args = (model, work, SearchOptions(), (), catalog.gpus)
    with searcher_for(*args) as first, searcher_for(*args) as second:
        assert first is not second
    with searcher_for(*args) as again:
        assert again in (first, second)


def test_a_sku_of_unknown_host_ram_does_not_inherit_the_misses_of_one_whose_ram_was_short(catalog):
    """ram_bytes 0 means "no limit" everywhere: offload that failed for lack of host RAM on one SKU
    must not be skipped on a same-GPU SKU with no RAM figure (pruned search = exhaustive loop)."""
    a100 = next(s for s in catalog.skus if s.slug == "8x-a100-sxm-40gb")
    clone = replace(a100, slug="8x-a100-sxm-40gb-ram-unknown", ram_bytes=0)
    small = replace(catalog, skus=(a100, clone))
    work = replace(full_7b(), model="llama-3.1-70b", seq_len=2048, global_batch_tokens=2048 * 64,
                   dataset_tokens=10**8, dataset_bytes=4 * 10**8)
    options = SearchOptions(top_n=3, node_counts=(1,))
    slow = recommend(work, Goal("cheapest"), small, options, exhaustive=True)
    fast = recommend(work, Goal("cheapest"), small, options)
    assert [(p.sku, p.strategy) for p in fast.plans] == [(p.sku, p.strategy) for p in slow.plans]
    assert any(p.sku == clone.slug for p in fast.plans)
