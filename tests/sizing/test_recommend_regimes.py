"""The recommender sizes and times every plan in its stack's regime with the estimator's own
time model (issue 14): a plan's time is estimate()'s, its MFU the estimator's for its GPU,
stack, width and TP; torchtitan plans are sized compiled in FSDP2 mixed precision; HSDP where a
stack declares it; pipeline stages when memory or the time model asks for them."""

import json
from dataclasses import replace

import pytest

from portal.sizing.catalog_data import catalog_from_seed
from portal.sizing.estimator import ParallelConfig, TrainingConfig, estimate, get_preset
from portal.sizing.estimator import compute as cmp
from portal.sizing.recommend import Goal, Plan, SearchOptions, Workload, plan_estimate, recommend
from portal.sizing.recommend.regimes import REGIMES, regime_of
from portal.sizing.recommend.search import make_gpu, make_link


@pytest.fixture(scope="module")
def catalog():
    return catalog_from_seed()


def only(catalog, *skus):
    return replace(catalog, skus=tuple(s for s in catalog.skus if s.slug in skus))


def work(model="llama-3.1-8b", **kw):
    base = dict(model=model, seq_len=4096, global_batch_tokens=4096 * 256, dataset_tokens=10**10,
                dataset_bytes=4 * 10**10, dataset_files=1000)
    return Workload(**(base | kw))


def timed_again(plan, catalog):
    sku = catalog.sku(plan.sku)
    gpu = catalog.gpu(sku.gpu_slug)
    network = catalog.network(plan.network) if plan.network else None
    return plan_estimate(plan, gpu=make_gpu(gpu), interconnect=make_link(sku, gpu, plan.nodes, network))


@pytest.mark.parametrize("workload", [
    work(), work(finetune="lora"), work(model="llama-3.1-70b", dataset_tokens=10**11),
    work(precision="fp8"),
    work(model="gpt2-1.5b", seq_len=1024, global_batch_tokens=1024 * 512),
], ids=["8b", "8b-lora", "70b", "8b-fp8", "gpt2"])
def test_a_plans_time_is_estimate_of_that_plan(catalog, workload):
    """No planning MFU, no table of its own: re-estimating the stored plan from scratch (its
    model, settings, layout and stack regime, on its GPU and links) gives the plan's time."""
    rec = recommend(workload, Goal("cheapest"), catalog, SearchOptions(top_n=8))
    stacks = set()
    for plan in rec.plans:
        assert plan.time_model == "estimator" and plan.training_config().mfu is None
        again = timed_again(plan, catalog)
        assert again.compute.time_to_train_seconds / 3600 == pytest.approx(plan.train_hours, rel=1e-12)
        assert again.compute.step_seconds == pytest.approx(plan.step_seconds, rel=1e-12)
        assert again.compute.mfu == plan.mfu
        assert again.per_gpu.total == plan.memory.total
        assert again.unmodelled == ()
        stacks.add(plan.stack.slug)
    assert stacks


@pytest.mark.parametrize("sku", ["8x-h100-sxm-80gb", "8x-b200-sxm-180gb", "8x-l40s-48gb", "8x-h200-sxm-141gb",
                                 "8x-h100-pcie-80gb"])
def test_the_plan_mfu_is_the_estimators_for_its_gpu_stack_width_and_tp(catalog, sku):
    rec = recommend(work(), Goal("fastest"), only(catalog, sku), SearchOptions(node_counts=(1,), top_n=1))
    plan = rec.best
    gpu = make_gpu(catalog.gpu(catalog.sku(sku).gpu_slug))
    model = get_preset("llama-3.1-8b")
    assert plan.mfu == cmp.mfu(plan.training_config(), model, gpu, plan.tp)
    kernels = plan.training_config().kernel_stack
    u, h0 = cmp.STACK_EFFICIENCY[kernels]
    ratio = gpu.bf16_tflops * 1e12 / (gpu.memory_bandwidth_gbps * 1e9) / cmp.A100_FLOPS_PER_BYTE
    assert plan.mfu == pytest.approx(cmp.matmul_efficiency(gpu.name) * u / (1 + h0 * ratio * plan.tp / 4096))


def test_h200_plans_use_h200s_matmul_efficiency_not_gh200s(catalog):
    plan = recommend(work(), Goal("fastest"), only(catalog, "8x-h200-sxm-141gb"),
                     SearchOptions(node_counts=(1,))).best
    h200 = make_gpu(catalog.gpu("h200-sxm-141gb"))
    assert cmp.matmul_efficiency(h200.name) == pytest.approx(794.5 / 989 * 1453.4 / 1402.6)
    assert cmp.matmul_efficiency(h200.name) != pytest.approx(828.6 / 989)
    assert plan.mfu == cmp.mfu(plan.training_config(), get_preset("llama-3.1-8b"), h200, plan.tp)


def test_torchtitan_plans_are_sized_compiled_in_fsdp2_mixed_precision(catalog):
    """8B at 8k tokens without activation checkpointing on 8 x H100 80GB: autocast/eager needs
    far more than the usable memory; torchtitan's regime (FSDP2 mixed precision, compiled model
    and loss; with the margin the published runs call for, on TP 2) fits."""
    w = work(seq_len=8192, global_batch_tokens=8192 * 16, dataset_tokens=10**9)
    rec = recommend(w, Goal("fastest"), only(catalog, "8x-h100-sxm-80gb"),
                    SearchOptions(node_counts=(1,), checkpointing=("none",)))
    plan = rec.best
    assert (plan.stack.slug, plan.checkpointing, plan.pp) == ("torchtitan", "none", 1)
    tc = plan.training_config()
    assert (tc.mixed_layout, tc.compile, tc.compile_loss) == ("fsdp2", True, True)
    assert plan.memory.total <= plan.usable_memory_bytes
    eager = estimate(get_preset("llama-3.1-8b"),
                     TrainingConfig(seq_len=8192, micro_batch=plan.micro_batch, grad_accum=plan.grad_accum),
                     ParallelConfig(dp=plan.dp, tp=plan.tp, sharding="fsdp-full-shard"))
    assert eager.per_gpu.total > plan.usable_memory_bytes


def test_each_stacks_regime_reaches_its_plans(catalog):
    rec = recommend(work(), Goal("cheapest"), catalog, SearchOptions(top_n=20))
    seen = set()
    for plan in (*rec.plans, *(p for p in recommend(work(), Goal("fastest"), catalog,
                                                   SearchOptions(top_n=20)).plans)):
        tc, pc = plan.training_config(), plan.parallel_config()
        seen.add(plan.stack.slug)
        if plan.stack.slug == "torchtitan":
            regime = (tc.mixed_layout, tc.compile, tc.compile_loss, pc.fsdp_reduce_dtype)
            assert regime == ("fsdp2", True, True, "fp32")
            assert tc.checkpointing == {"none": "none", "selective": "selective-op", "full": "full"}[
                plan.checkpointing]
            assert pc.sp == (plan.tp > 1) and pc.reshard_after_forward == (plan.pp == 1)
        elif plan.stack.slug == "fsdp":
            assert (tc.mixed_layout, pc.fsdp_reduce_dtype, tc.compile) == ("fsdp2", "bf16", False)
            assert plan.checkpointing in ("none", "full")
        elif plan.stack.slug == "deepspeed":
            h = get_preset("llama-3.1-8b").hidden_size
            assert pc.zero.reduce_bucket_size == h * h and pc.zero.overlap_comm is True
    assert seen >= {"torchtitan"}


def test_checkpointing_modes_are_the_ones_each_stack_runs():
    model = get_preset("llama-3.1-8b")
    assert REGIMES["ddp"].policy("selective", model) is None  # HF gradient checkpointing: whole layers
    assert REGIMES["fsdp"].policy("full", model) == "full"
    assert REGIMES["torchtitan"].policy("selective", model) == "selective-op"
    assert REGIMES["torchtitan"].policy("selective", get_preset("mixtral-8x7b")) is None
    assert not REGIMES["torchtitan"].runs(get_preset("gpt2-124m"))
    unknown = regime_of("my-own-stack")  # an unknown stack: the estimator's defaults
    assert unknown.training_knobs("selective", model, "sdpa", "bf16-mixed") == {}
    assert unknown.layout_knobs("fsdp-full-shard", "bf16-mixed") == {}


def test_hsdp_is_proposed_across_nodes_where_a_stack_declares_it(catalog):
    rec = recommend(work(), Goal("fastest"), catalog, SearchOptions(top_n=10))
    hsdp = [p for p in rec.points if p.strategy == "hsdp"]
    assert hsdp and all(p.nodes > 1 for p in hsdp)
    undeclared = replace(catalog, stack=tuple(
        replace(s, data_parallel=tuple(k for k in s.data_parallel if k != "fsdp2-hybrid-shard"))
        for s in catalog.stack))
    rec = recommend(work(), Goal("fastest"), undeclared, SearchOptions(top_n=10))
    assert not [p for p in rec.points if p.strategy == "hsdp"]


def test_pipeline_stages_when_the_time_model_makes_them_faster(catalog):
    """On 4 B200 nodes over one HDR 200 port each a flat FSDP layout fits the 70B model, yet a
    pipeline that sends only activations between the nodes trains it faster: it is proposed.
    (The 8B model's flat layout moves little enough over the network to stay the fastest.)"""
    hdr = replace(only(catalog, "8x-b200-sxm-180gb"),
                  networks=tuple(n for n in catalog.networks if n.slug in ("eth-1g", "ib-hdr-200g")))
    options = SearchOptions(node_counts=(4,), top_n=1)
    best = recommend(work("llama-3.1-70b"), Goal("fastest"), hdr, options).best
    flat = recommend(work("llama-3.1-70b"), Goal("fastest"), hdr, replace(options, pp_sizes=(1,))).best
    assert (best.network, flat.network) == ("ib-hdr-200g", "ib-hdr-200g")
    assert best.pp > 1 and flat.pp == 1
    assert best.train_hours < flat.train_hours


def test_a_124m_model_gets_no_pipeline(catalog):
    rec = recommend(work(model="gpt2-124m", seq_len=1024, global_batch_tokens=1024 * 512), Goal("fastest"),
                    catalog, SearchOptions(top_n=10))
    assert all(p.pp == 1 for p in (*rec.points, *rec.plans))


@pytest.mark.parametrize("workload, lacks", [
    # fp8 is torchtitan's only, and torchtitan builds llama3 shapes without adapters
    (work("llama-3.1-8b", precision="fp8", finetune="lora"),
     ["PyTorch DDP (torchrun) has no fp8 training", "torchtitan (FSDP2 + TP + PP + CP) has no LoRA"]),
    (work("llama-2-70b", precision="fp8"), ["torchtitan (FSDP2 + TP + PP + CP) has no model family"]),
])
def test_a_job_no_stack_can_run_is_refused_with_each_stacks_lack(catalog, workload, lacks):
    with pytest.raises(ValueError, match="no training stack in the catalog can run this job") as refused:
        recommend(workload, Goal("cheapest"), catalog)
    for lack in lacks:
        assert lack in str(refused.value)
    assert "global batch" not in str(refused.value)


def test_bf16_plans_are_sized_as_the_stacks_run_them_and_re_estimate(catalog):
    """No stack keeps pure-bf16 states: a bf16 job gets the bf16-mixed plans' memory, and its
    stored regime says so (re-estimating gives the same bytes); torchtitan takes no fp16."""
    pure = recommend(work(precision="bf16"), Goal("fastest"), catalog, SearchOptions(top_n=5))
    mixed = recommend(work(precision="bf16-mixed"), Goal("fastest"), catalog, SearchOptions(top_n=5))
    assert [(p.sku, p.stack.slug, p.memory) for p in pure.plans] == \
        [(p.sku, p.stack.slug, p.memory) for p in mixed.plans]
    for plan in pure.plans:
        assert plan.precision == "bf16" and dict(plan.training_regime)["precision"] == "bf16-mixed"
        assert timed_again(plan, catalog).per_gpu.total == plan.memory.total
    fp16 = recommend(work(precision="fp16-mixed"), Goal("fastest"), catalog, SearchOptions(top_n=5))
    assert fp16.plans and all(p.stack.slug != "torchtitan" for p in fp16.plans)


def test_the_search_rates_a_layout_with_its_own_configs_replicated_tp():
    for slug, regime in REGIMES.items():
        for tp in (1, 2, 8):
            knobs = regime.parallel_knobs(sharding="fsdp-full-shard", tp=tp, pp=1, dp=8, nodes=1,
                                          model=get_preset("llama-3.1-8b"))
            parallel = ParallelConfig(dp=8, tp=tp, sharding="fsdp-full-shard", sp=knobs.get("sp", False))
            assert regime.replicated_tp(tp) == parallel.replicated_tp, (slug, tp)


def test_a_hopper_sdpa_plan_is_timed_at_cudnn_attention_as_the_stacks_torch_runs_it(catalog):
    """Version 8: a plan on H100/H200 SKUs is timed as it re-estimates on its SKU and network,
    with an SDPA step's attention at cuDNN's rate (the kernel the stacks' torch picks there);
    the same plan on an older torch wheel (attention_kernel fa2 in its regime) takes longer."""
    hopper = only(catalog, *(s.slug for s in catalog.skus if s.gpu_slug.startswith(("h100", "h200"))))
    plans = recommend(work(seq_len=16384, global_batch_tokens=16384 * 64), Goal("cheapest"), hopper,
                      SearchOptions(top_n=3)).plans
    assert plans and {p.attention for p in plans} == {"sdpa"}
    for plan in plans:
        now = timed_again(plan, catalog).compute
        assert now.time_to_train_seconds == pytest.approx(plan.train_hours * 3600)
        older = Plan.from_dict(json.loads(json.dumps(plan.to_dict())))
        older = replace(older, training_regime=(*older.training_regime, ("attention_kernel", "fa2")))
        assert timed_again(older, catalog).compute.step_seconds > 1.05 * now.step_seconds
