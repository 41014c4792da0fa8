"""Stacks say what they can run; the recommender proposes only layouts its stack declares."""

from dataclasses import replace

import pytest

from portal.sizing.catalog_data import catalog_from_seed
from portal.sizing.estimator import list_presets
from portal.sizing.recommend import CatalogData, Goal, SearchOptions, StackOptionSpec, Workload, recommend
from portal.sizing.recommend.stacks import Needs, choose_stack, missing, stack_problem


@pytest.fixture(scope="module")
def catalog():
    return catalog_from_seed()


def stack(catalog, slug):
    return next(s for s in catalog.stack if s.slug == slug)


def without(catalog, *slugs) -> CatalogData:
    return replace(catalog, stack=tuple(s for s in catalog.stack if s.slug not in slugs))


def work(**kw):
    base = dict(model="mistral-7b", seq_len=4096, global_batch_tokens=4096 * 256,
                dataset_tokens=10**10, dataset_bytes=4 * 10**10, dataset_files=1000)
    return Workload(**(base | kw))


def test_the_seed_declares_the_four_stacks(catalog):
    slugs = {s.slug for s in catalog.stack if s.kind == "strategy"}
    assert slugs == {"ddp", "fsdp", "deepspeed", "torchtitan"}
    titan = stack(catalog, "torchtitan")
    assert titan.tensor_parallel and titan.pipeline_parallel and titan.context_parallel and titan.fp8
    assert set(stack(catalog, "deepspeed").data_parallel) == {"zero1", "zero2", "zero3"}
    assert not stack(catalog, "deepspeed").tensor_parallel
    for s in catalog.stack:
        if s.kind == "strategy":
            assert "torch==2.13.0" in s.packages and s.description


def test_deepspeed_cannot_run_tensor_parallelism_and_says_who_can(catalog):
    needs = Needs.of(sharding="fsdp-full-shard", offload="none", tp=4)
    text = stack_problem(stack(catalog, "deepspeed"), needs, catalog.stack)
    assert text == ("DeepSpeed (ZeRO stage 1–3) cannot run FSDP2 full shard and tensor parallelism 4 of "
                    "this plan: choose torchtitan (FSDP2 + TP + PP + CP).")
    assert stack_problem(stack(catalog, "torchtitan"), needs, catalog.stack) == ""


def test_needs_from_a_stored_plan_and_from_a_partial_one():
    plan = {"sharding": "zero3", "offload": "optimizer", "tp": 1, "pp": 2, "finetune": "qlora",
            "precision": "bf16-mixed"}
    needs = Needs.from_plan(plan)
    assert needs == Needs("zero3", 1, 2, 1, True, "qlora", False)
    assert Needs.from_plan({"model": "mistral-7b"}).family == "mistral"
    assert Needs.from_plan({"cp": 2}).cp == 2  # top-level, like tp and pp
    assert Needs.from_plan({"stack_settings": {"cp": 2}}).cp == 1  # display values are not read
    assert Needs.from_plan({}) == Needs()  # a partial plan needs nothing it does not name
    assert Needs.from_plan({"tp": "4", "pp": True}) == Needs()  # ill-typed figures are not needs


def test_choose_stack_prefers_the_strategy_s_own_then_catalog_order(catalog):
    assert choose_stack(Needs("zero3"), catalog.stack, prefer="deepspeed").slug == "deepspeed"
    assert choose_stack(Needs("fsdp2-full-shard"), catalog.stack, prefer="fsdp").slug == "fsdp"
    assert choose_stack(Needs("fsdp2-full-shard", pp=2), catalog.stack, prefer="fsdp").slug == "torchtitan"
    fp8 = Needs("fsdp2-full-shard", fp8=True)
    assert choose_stack(fp8, catalog.stack, prefer="fsdp").slug == "torchtitan"
    assert choose_stack(Needs("ddp", tp=2), catalog.stack, prefer="ddp") is None
    assert missing(stack(catalog, "ddp"), Needs("ddp", finetune="qlora")) == []
    assert missing(stack(catalog, "torchtitan"), Needs("fsdp2-full-shard", finetune="qlora")) == [
        "QLoRA (4-bit base + adapters)"]


def test_a_stack_option_with_unknown_capabilities_is_refused():
    with pytest.raises(ValueError, match="unknown data-parallel kind 'zero4'"):
        StackOptionSpec("x", "X", "strategy", data_parallel=("zero4",))
    with pytest.raises(ValueError, match="not a pinned requirement"):
        StackOptionSpec("x", "X", "strategy", data_parallel=("ddp",), packages=("torch>=2",))


def test_without_torchtitan_no_plan_has_tensor_or_pipeline_parallelism(catalog):
    rec = recommend(work(model="llama-3.1-70b"), Goal("fastest"), without(catalog, "torchtitan"),
                    SearchOptions(top_n=10))
    assert all(p.tp == 1 and p.pp == 1 for p in rec.plans)
    assert all(pt.tp == 1 and pt.pp == 1 for pt in rec.points)
    with_titan = recommend(work(model="llama-3.1-70b"), Goal("fastest"), catalog, SearchOptions(top_n=10))
    parallel = [p for p in with_titan.plans if p.tp > 1 or p.pp > 1]
    assert parallel and all(p.stack.slug == "torchtitan" for p in parallel)


def test_qlora_needs_a_stack_with_qlora_and_says_four_bit_base_and_adapters(catalog):
    rec = recommend(work(model="llama-3.1-70b", finetune="qlora", dataset_tokens=10**9), Goal("cheapest"),
                    catalog, SearchOptions(top_n=5))
    for plan in rec.plans:
        assert stack(catalog, plan.stack.slug).qlora
        settings = dict(plan.stack.settings)
        assert settings["base_weights"] == "4-bit NF4" and settings["load_in_4bit"] is True
        assert settings["adapters"] == "lora" and settings["lora_r"] == 16
    no_qlora = replace(catalog, stack=tuple(replace(s, qlora=False) for s in catalog.stack))
    with pytest.raises(ValueError, match=r"no training stack in the catalog .*has no QLoRA"):
        recommend(work(model="llama-3.1-70b", finetune="qlora", dataset_tokens=10**9), Goal("cheapest"),
                  no_qlora)


def test_fp8_plans_run_on_a_stack_with_fp8(catalog):
    rec = recommend(work(model="llama-3.1-8b", precision="fp8"), Goal("cheapest"), catalog,
                    SearchOptions(top_n=5))
    assert {p.stack.slug for p in rec.plans} == {"torchtitan"}
    # torchtitan 0.2.2's converter name (torchtitan/components/quantization/float8.py)
    assert all(dict(p.stack.settings)["model.converters"] == ["quantize.linear.float8"]
               for p in rec.plans)


def test_fp8_mistral_has_no_plan_because_torchtitan_cannot_build_mistral(catalog):
    """Only torchtitan declares fp8, and torchtitan 0.2.2 has no Mistral model: nothing is
    proposed (before, the plan rendered a dense llama3 8B under the name mistral-7b)."""
    with pytest.raises(ValueError, match=r"no training stack .* torchtitan .* has no model family Mistral"):
        recommend(work(precision="fp8"), Goal("cheapest"), catalog, SearchOptions(top_n=5))


@pytest.mark.parametrize("model, family", [
    ("llama-3.1-8b", "llama3"), ("llama-3.1-70b", "llama3"), ("llama-3.1-405b", "llama3"),
    ("llama-2-7b", "llama"), ("llama-2-70b", "llama"), ("mistral-7b", "mistral"),
    ("mixtral-8x7b", "mixtral"), ("qwen2.5-7b", "qwen2"), ("qwen2.5-72b", "qwen2"),
    ("gpt2-124m", "gpt2"), ("bert-base", "bert"), ("Llama-3-8B", None)])
def test_each_preset_has_the_family_of_its_architecture(model, family):
    from portal.sizing.recommend.stacks import model_family

    assert model_family(model) == family


def test_torchtitan_refuses_a_model_family_it_cannot_build_and_names_a_stack_that_can(catalog):
    for model in ("mistral-7b", "qwen2.5-72b", "mixtral-8x7b", "llama-2-70b"):
        needs = Needs.from_plan({"model": model, "sharding": "fsdp-full-shard"})
        text = stack_problem(stack(catalog, "torchtitan"), needs, catalog.stack)
        assert text.startswith("torchtitan (FSDP2 + TP + PP + CP) cannot run model family "), text
        assert text.endswith("choose PyTorch FSDP2 (Accelerate)."), text
    llama = Needs.from_plan({"model": "llama-3.1-70b", "sharding": "fsdp-full-shard", "tp": 4})
    assert stack_problem(stack(catalog, "torchtitan"), llama, catalog.stack) == ""


def test_no_recommended_torchtitan_plan_has_a_model_torchtitan_cannot_build(catalog):
    for model in ("qwen2.5-72b", "mixtral-8x7b", "mistral-7b"):
        rec = recommend(work(model=model), Goal("fastest"), catalog, SearchOptions(top_n=10))
        assert rec.plans and all(p.stack.slug != "torchtitan" for p in rec.plans), model
        assert all(p.tp == 1 and p.pp == 1 for p in rec.plans), model


def test_op_level_checkpointing_needs_a_stack_that_has_it(catalog):
    needs = Needs.from_plan({"sharding": "fsdp-full-shard", "checkpointing": "selective-op"})
    assert missing(stack(catalog, "fsdp"), needs) == ["op-level selective activation checkpointing"]
    assert missing(stack(catalog, "torchtitan"), needs) == []


def test_a_catalog_without_declared_stacks_is_an_error_that_says_so(catalog):
    bare = replace(catalog, stack=tuple(StackOptionSpec(s.slug, s.name, s.kind) for s in catalog.stack))
    with pytest.raises(ValueError, match="declares no training stack"):
        recommend(work(), Goal("cheapest"), bare)


GOALS = [Goal("fastest"), Goal("cheapest"), Goal("deadline", deadline_hours=24 * 14),
         Goal("budget", budget_usd=20_000)]


# QLoRA on every preset whose linear layers carry the usual adapter targets (q/k/v/o_proj).
CASES = [(p, "full") for p in list_presets()] + [
    (p, "qlora") for p in list_presets() if not p.startswith(("bert", "gpt2"))]


@pytest.mark.parametrize(("preset", "finetune"), CASES)
def test_every_ranked_plan_is_declared_by_its_stack(catalog, preset, finetune):
    """All presets x goals: every ranked plan's layout is one its stack declares it can run."""
    seq = 512 if preset.startswith("bert") else 1024 if preset.startswith("gpt2") else 4096
    workload = Workload(model=preset, finetune=finetune, seq_len=seq, global_batch_tokens=seq * 256,
                        dataset_tokens=2 * 10**9, dataset_bytes=8 * 10**9)
    stacks = {s.slug: s for s in catalog.stack}
    checked = 0
    for goal in GOALS:
        try:
            rec = recommend(workload, goal, catalog, SearchOptions(top_n=8))
        except ValueError as exc:  # nothing fits (405B full): said so, no plan to check
            assert "no server in the catalog fits" in str(exc)
            continue
        for plan in rec.plans:
            declared = stacks[plan.stack.slug]
            assert declared.kind == "strategy"
            assert missing(declared, Needs.from_plan(plan.to_dict())) == [], (goal, plan.strategy, plan.tp,
                                                                              plan.pp, plan.stack.slug)
            if plan.tp > 1 or plan.pp > 1:
                assert declared.tensor_parallel or plan.tp == 1
                assert declared.pipeline_parallel or plan.pp == 1
            checked += 1
    assert checked or preset == "llama-3.1-405b"


def test_every_plan_leaves_at_least_ten_percent_of_gpu_memory_free(catalog):
    """The safety margin: never 1 GiB of headroom on a 180 GB GPU."""
    from portal.sizing.recommend import MEMORY_RESERVE_FRACTION

    assert MEMORY_RESERVE_FRACTION >= 0.10
    for model in ("llama-3.1-70b", "mistral-7b"):
        rec = recommend(work(model=model), Goal("cheapest"), catalog, SearchOptions(top_n=10))
        for plan in rec.plans:
            assert plan.usable_memory_bytes <= plan.gpu_memory_bytes * 0.90
            assert plan.memory.total <= plan.gpu_memory_bytes * (1 - MEMORY_RESERVE_FRACTION)
        for point in rec.points:
            gpu = catalog.gpu(point.gpu)
            assert gpu.memory_bytes - point.per_gpu_total_bytes >= 0.10 * gpu.memory_bytes


def test_no_tensor_parallelism_over_plain_pcie_and_at_most_pairs_over_nvlink_bridges(catalog):
    rec = recommend(work(model="llama-2-13b"), Goal("cheapest"), catalog, SearchOptions(top_n=10))
    interconnect = {s.slug: s.interconnect for s in catalog.skus}
    points = [*rec.points, *rec.plans]
    assert any(interconnect[p.sku] == "pcie" for p in points)
    for p in points:
        if interconnect[p.sku] == "pcie":
            assert p.tp == 1, p
        elif interconnect[p.sku] == "nvlink-bridge":
            assert p.tp <= 2, p


def test_pipeline_stages_only_when_memory_needs_them(catalog):
    """A size where a layout without pipeline fits is never given one; exhaustive agrees."""
    small = replace(catalog, skus=tuple(s for s in catalog.skus if s.slug in (
        "8x-h100-sxm-80gb", "4x-a100-sxm-80gb", "2x-a100-pcie-80gb-nvl")))
    options = SearchOptions(node_counts=(1, 2), top_n=10)
    for model in ("mistral-7b", "llama-3.1-70b"):
        fast = recommend(work(model=model), Goal("fastest"), small, options)
        slow = recommend(work(model=model), Goal("fastest"), small, options, exhaustive=True)
        flat_sizes = {(p.sku, p.nodes) for p in fast.points if p.pp == 1}
        assert all((p.sku, p.nodes) not in flat_sizes for p in fast.points if p.pp > 1)
        assert [(p.sku, p.nodes, p.tp, p.pp) for p in fast.plans] == [
            (p.sku, p.nodes, p.tp, p.pp) for p in slow.plans]
    # a fixed pipeline size (the wizard's field) is still honoured
    # (llama: only torchtitan pipelines, and it builds no Mistral)
    fixed = recommend(work(model="llama-3.1-8b"), Goal("fastest"), small,
                      SearchOptions(node_counts=(1,), pp_sizes=(2,)))
    assert {p.pp for p in fixed.plans} == {2}


def test_the_configurator_and_api_check_refuses_torchtitan_for_a_mistral_plan(catalog):
    """portal.quotes.rules.stack_message is the one check the configurator, POST /api/v1/quotes
    and POST /api/v1/orders run: it names the family and a stack that builds it."""
    from portal.quotes.rules import stack_message

    message = stack_message(stack(catalog, "torchtitan"), {"model": "mistral-7b", "tp": 1},
                            catalog.stack)
    assert message.field == "strategy"
    assert "cannot run model family Mistral" in message.text
    assert stack_message(stack(catalog, "fsdp"), {"model": "mistral-7b"}, catalog.stack) is None


def test_a_stack_slug_the_portal_does_not_know_gets_plans_in_the_estimators_defaults(catalog):
    """An operator's own stack option (declared capabilities, a new slug) is proposed like the
    others and its plan names the settings asked of it, not a KeyError."""
    ddp = next(s for s in catalog.stack if s.slug == "ddp")
    custom = replace(ddp, slug="my-ddp", name="Custom DDP")
    mine = replace(catalog, stack=(custom, *(s for s in catalog.stack if s.slug != "ddp")))
    rec = recommend(work(model="gpt2-1.5b", seq_len=1024, global_batch_tokens=1024 * 512), Goal("cheapest"),
                    mine, SearchOptions(top_n=8))
    theirs = [p for p in rec.plans if p.stack.slug == "my-ddp"]
    assert theirs and all(p.stack.name == "Custom DDP" for p in theirs)
    assert dict(theirs[0].stack.settings)["sharding"] == "none"
