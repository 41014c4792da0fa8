"""Time regimes (issue 14): communication per tier and on the wire by dtype, pipeline schedules,
async TP, CPU offload time, PCIe cards, float8 recipes, and the search-facing pieces of the time
model (flop_rate, comm_floor) agreeing with estimate(). Expectations by hand on the tiny model of
test_regimes.py."""

import pytest

from portal.sizing.estimator import (
    GPUSpec,
    HostSpec,
    Interconnect,
    ParallelConfig,
    TrainingConfig,
    comm_floor,
    comm_volume,
    estimate,
    estimate_memory,
    flop_rate,
    get_preset,
)
from portal.sizing.estimator import activations as act
from portal.sizing.estimator import compute as cmp
from tests.sizing.test_regimes import H100, HEADS, TINY, L, P, V

FSDP2 = TrainingConfig(precision="bf16-mixed", mixed_layout="fsdp2", seq_len=8)
NDR = Interconnect(intra_node_gbps=450, inter_node_gbit=400, gpus_per_node=8)
INTRA = 450 * 0.8 * 1e9  # NVLink per direction x LINK_EFFICIENCY
INTER = 400 / 8 * 0.8 * 1e9  # Gb/s per GPU -> GB/s x LINK_EFFICIENCY


def _compute(training, parallel, link=NDR):
    return estimate(TINY, training, parallel, gpu=H100, interconnect=link).compute


def _bandwidth(c, kind):
    """A kind's communication seconds less NCCL's latency of its collectives (tested in
    test_scale_principles.py): its bytes at the group's bandwidth."""
    return c.comm_seconds[kind] - c.comm_latency_seconds.get(kind, 0.0)


# -- data-parallel traffic ------------------------------------------------------------------------
def test_hsdp_costs_the_shard_group_on_nvlink_and_the_replica_all_reduce_on_the_network():
    c = _compute(FSDP2, ParallelConfig(dp=16, sharding="fsdp-hybrid", hybrid_shard_size=8))
    # shard group of 8 (one node): bf16 all-gather forward and backward, fp32 reduce-scatter
    assert c.comm_bytes["dp"] == pytest.approx((2 * P * 2 + P * 4) * 7 / 8)
    # 2 replicas: all-reduce of the fp32 reduce-scattered shard (P / 8 elements)
    assert c.comm_bytes["dp_replicate"] == pytest.approx(2 * (P / 8 * 4) * 1 / 2)
    assert _bandwidth(c, "dp") == pytest.approx(c.comm_bytes["dp"] / INTRA)
    assert _bandwidth(c, "dp_replicate") == pytest.approx(c.comm_bytes["dp_replicate"] / INTER)
    full = _compute(FSDP2, ParallelConfig(dp=16, sharding="fsdp-full-shard"))
    # a ring over both nodes crosses on every NIC of the node: 8 x the per-GPU share, at most NVLink
    assert _bandwidth(full, "dp") == pytest.approx((2 * P * 2 + P * 4) * 15 / 16 / min(8 * INTER, INTRA))
    # over a 200 Gb/s port per node the gathers HSDP keeps on NVLink outweigh its replica all-reduce
    port = Interconnect(intra_node_gbps=450, inter_node_gbit=200 / 8, gpus_per_node=8)
    hsdp = _compute(FSDP2, ParallelConfig(dp=16, sharding="fsdp-hybrid", hybrid_shard_size=8), port)
    flat = _compute(FSDP2, ParallelConfig(dp=16, sharding="fsdp-full-shard"), port)
    assert _bandwidth(flat, "dp") == pytest.approx((2 * P * 2 + P * 4) * 15 / 16 / (200 / 8 * 0.8 * 1e9))
    assert hsdp.comm_seconds["dp"] + hsdp.comm_seconds["dp_replicate"] < flat.comm_seconds["dp"]


def test_gradients_go_on_the_wire_in_the_dtype_the_stack_reduces_in():
    ddp = _compute(TrainingConfig(seq_len=8), ParallelConfig(dp=4))  # autocast: fp32 gradients
    assert ddp.comm_bytes["dp"] == pytest.approx(2 * P * 4 * 3 / 4)
    half = TrainingConfig(precision="fp16-mixed", seq_len=8)
    zero1 = _compute(half, ParallelConfig(dp=4, sharding="zero1"))
    assert zero1.comm_bytes["dp"] == pytest.approx(2 * P * 2 * 3 / 4)  # DeepSpeed: half gradients


def test_sharded_weights_are_gathered_and_reduced_every_micro_batch():
    one = _compute(FSDP2, ParallelConfig(dp=4, sharding="fsdp-full-shard"))
    four = _compute(TrainingConfig(precision="bf16-mixed", mixed_layout="fsdp2", seq_len=8, grad_accum=4),
                    ParallelConfig(dp=4, sharding="fsdp-full-shard"))
    assert one.comm_bytes["dp"] == pytest.approx((2 * P * 2 + P * 4) * 3 / 4)
    assert four.comm_bytes["dp"] == pytest.approx(4 * one.comm_bytes["dp"])
    kept = ParallelConfig(dp=4, sharding="fsdp-full-shard", reshard_after_forward=False)
    no_reshard = _compute(FSDP2, kept)
    assert no_reshard.comm_bytes["dp"] == pytest.approx((P * 2 + P * 4) * 3 / 4)  # one all-gather
    zero2 = _compute(TrainingConfig(precision="fp16-mixed", seq_len=8, grad_accum=4),
                     ParallelConfig(dp=4, sharding="zero2"))
    # reduce-scatter each micro-batch, the updated half weights all-gathered once per step
    assert zero2.comm_bytes["dp"] == pytest.approx((P * 2 * 4 + P * 2) * 3 / 4)


def test_the_forward_all_gather_hides_behind_the_forward_and_the_rest_behind_the_backward():
    parallel = ParallelConfig(dp=4, sharding="fsdp-full-shard")
    share = cmp.dp_forward_share(parallel, P, P, cmp.comm_dtypes(FSDP2, parallel, "fsdp2", 0.5), FSDP2)
    assert share == pytest.approx(2 * P / (2 * 2 * P + 4 * P))
    # 8 s of traffic, a quarter in forward, over 3 s of compute at 90 % overlap; the 2.7 s that
    # hide slow the compute under them (principle 13)
    assert cmp.exposed_dp_seconds(8.0, 0.0, 0.25, 3.0, 0.9) == pytest.approx(
        (2 - 0.9) + (6 - 1.8) + cmp.OVERLAP_SLOWDOWN * (0.9 + 1.8))


# -- pipeline schedules, async TP ----------------------------------------------------------------------
def test_zero_bubble_h1_leaves_a_third_of_the_1f1b_bubble():
    assert cmp.bubble_fraction(4, 8) == pytest.approx(3 / 11)
    assert cmp.bubble_fraction(4, 8, 1, "zb-h1") == pytest.approx(1 / 9)  # (p-1)/3 idle slots of m + (p-1)/3
    with pytest.raises(ValueError, match="pp > 1"):
        ParallelConfig(pp_schedule="zb-h1")


def test_interleaved_1f1b_holds_more_micro_batches_in_flight():
    training = TrainingConfig(precision="bf16", seq_len=16, grad_accum=8)
    plain = estimate_memory(TINY, training, ParallelConfig(pp=2)).per_gpu.activations
    virtual = estimate_memory(TINY, training, ParallelConfig(pp=2, pp_interleave=2)).per_gpu.activations
    outside = act.outside_layers(TINY, training, act.dtype_facts(training, "pure-half"), 1, 16)
    # the first stage warms up (p-1)/(p v) further: 2 stages, 2 virtual each -> 1 + 1/4
    assert virtual - outside == int((plain - outside) * (1 + 1 / 4))


def test_async_tp_hides_all_but_one_chunk_of_the_forward_behind_its_matmuls():
    tp4 = ParallelConfig(tp=4, async_tp=True)
    # forward: 5 s of collectives in 4 chunks, the first exposed, the rest behind 1 s of matmuls
    # (which the hidden second slows, principle 13)
    slowdown = cmp.OVERLAP_SLOWDOWN
    assert cmp.exposed_tp_seconds(10.0, 3.0, tp4) == pytest.approx(5 + 1.25 + (5 - 1.25 - 1) + slowdown * 1)
    # backward's stay
    assert cmp.exposed_tp_seconds(10.0, 100.0, tp4) == pytest.approx(5 + 1.25 + slowdown * 3.75)
    assert cmp.exposed_tp_seconds(10.0, 100.0, ParallelConfig(tp=4)) == 10.0
    with pytest.raises(ValueError, match="tp > 1"):
        ParallelConfig(async_tp=True)


# -- CPU offload, PCIe cards, float8 --------------------------------------------------------------------
def test_offload_time_is_the_host_optimizer_step_and_the_weights_coming_back():
    link = 32 * 0.8e9  # PCIe Gen4 x16 per direction x PCIE_EFFICIENCY
    host = HostSpec()
    zero = ParallelConfig(dp=8, sharding="zero2", offload="optimizer")
    # DeepSpeed's CPUAdam: 7 fp32 passes per parameter on the rank's one thread (test_scale_principles)
    step = 1e9 * 7 * 4 / (host.core_bandwidth_gbps * 1e9)
    expected = step + 2e9 / link  # half weights up; fp32 gradients down hide behind the backward
    assert cmp.offload_seconds(zero, 1e9, 1e9, 1, 32, 8, 10.0, host=host) == pytest.approx(expected)
    fsdp = ParallelConfig(dp=8, sharding="fsdp-full-shard", offload="optimizer+params")
    # a hand-written torch.optim.AdamW's single-tensor loop on the CPU: 20 passes; the weight
    # shards' traffic hides behind 10 s
    assert cmp.offload_seconds(fsdp, 1e9, 1e9, 1, 32, 8, 10.0, host=host, impl="single-tensor") == \
        pytest.approx(step * 20 / 7 + 2e9 / link)
    none = ParallelConfig(dp=8, sharding="zero2")
    assert cmp.offload_seconds(none, 1e9, 1e9, 1, 32, 8, 10.0, host=host) == 0.0


def test_pcie_cards_sustain_less_of_their_peak_than_their_sxm_sibling():
    ratio = 252.9 / 271.2  # A100 PCIe vs SXM, same die and datasheet peak
    assert cmp.matmul_efficiency("NVIDIA H100 PCIe 80GB") == pytest.approx(794.5 / 989 * ratio)
    assert cmp.matmul_efficiency("NVIDIA H100 NVL 94GB") == pytest.approx(794.5 / 989 * ratio)
    h200 = 794.5 / 989 * 1453.4 / 1402.6
    assert cmp.matmul_efficiency("NVIDIA H200 NVL 141GB") == pytest.approx(h200 * ratio)
    assert cmp.matmul_efficiency("NVIDIA H100 SXM5 80GB") == pytest.approx(794.5 / 989)


def test_rowwise_float8_casts_every_operand_twice():
    model = get_preset("llama-3.1-8b")
    tensorwise = TrainingConfig(precision="fp8", seq_len=8192, compile=True)
    rowwise = TrainingConfig(precision="fp8", seq_len=8192, compile=True, float8_recipe="rowwise")
    share = cmp.memory_bound_share(tensorwise, model, H100)
    difference = cmp.fp8_time_factor(rowwise, model, H100) - cmp.fp8_time_factor(tensorwise, model, H100)
    assert difference == pytest.approx(share * 0.3 * (2 - 1) / (1 + share))


# -- what the recommender's search uses equals what estimate() does --------------------------------------
def test_flop_rate_is_the_rate_estimate_divides_hardware_flops_by():
    model = get_preset("llama-3.1-8b")
    training = TrainingConfig(precision="bf16-mixed", mixed_layout="fsdp2", seq_len=4096, grad_accum=4,
                              compile=True)
    parallel = ParallelConfig(dp=4, tp=2, sharding="fsdp-full-shard")
    c = estimate(model, training, parallel, gpu=H100, interconnect=NDR).compute
    rate, mfu = flop_rate(model, training, H100, tp=2, tensor_parallel=2)
    assert mfu == c.mfu
    # the attention FLOPs at their kernel's rate besides (cuDNN's under SDPA on Hopper: slower)
    extra = cmp.attention_slowdown(training, H100, model) - 1
    extra *= cmp.attention_flops_per_token(model, training)
    assert extra > 0
    assert c.compute_seconds - c.memory_bound_seconds == pytest.approx(
        (c.hardware_flops_per_token + extra) * 4096 * 4 / 2 / rate)


@pytest.mark.parametrize("parallel", [
    ParallelConfig(dp=16, tp=2, pp=2, sharding="fsdp-full-shard", sp=True, reshard_after_forward=False),
    ParallelConfig(dp=32, sharding="fsdp-hybrid", hybrid_shard_size=8),
    ParallelConfig(dp=16, sharding="zero2"),
])
def test_comm_floor_adds_what_estimate_adds_for_communication(parallel):
    model = get_preset("llama-3.1-8b")
    training = TrainingConfig(precision="bf16-mixed", seq_len=4096, grad_accum=4, checkpointing="full",
                              mixed_layout="fsdp2" if parallel.sharding.startswith("fsdp") else None)
    link = Interconnect(intra_node_gbps=450, inter_node_gbit=50, gpus_per_node=8)
    c = estimate(model, training, parallel, gpu=H100, interconnect=link).compute
    floor = comm_floor(model, training, parallel, link)
    assert floor.exposed(c.compute_seconds) == pytest.approx(c.exposed_comm_seconds, rel=1e-12)
    assert floor.exposed(c.compute_seconds / 2) >= floor.exposed(c.compute_seconds)  # less compute hides less
    # the bytes worked out once serve any link: the same floor as computed from scratch on another
    other = Interconnect(intra_node_gbps=900, inter_node_gbit=400, gpus_per_node=8)
    volume = comm_volume(model, training, parallel)
    fresh = comm_floor(model, training, parallel, other)
    assert comm_floor(model, training, parallel, other, volume) == fresh
    assert comm_floor(model, training, parallel, other).dp_seconds < floor.dp_seconds  # faster link


@pytest.mark.parametrize("parallel", [
    ParallelConfig(dp=4, tp=4, sp=True, async_tp=True, sharding="fsdp-full-shard"),
    ParallelConfig(dp=4, cp=4, sharding="fsdp-full-shard"),
])
def test_comm_floor_bounds_the_step_from_below_where_traffic_hides_behind_matmuls_or_attention(parallel):
    """Async TP and ring attention hide part of their traffic, which then slows the compute
    (principle 13): the floor counts what hides however long the compute (async TP's unhidden
    share, the ring's latency), so it stays at or below the estimate, and compute + floor still
    grows with the compute, which is what lets a search prune with a lower bound of the compute."""
    model = get_preset("llama-3.1-8b")
    training = TrainingConfig(precision="bf16-mixed", seq_len=8192, grad_accum=2, checkpointing="full",
                              mixed_layout="fsdp2")
    link = Interconnect(intra_node_gbps=450, inter_node_gbit=50, gpus_per_node=8)
    c = estimate(model, training, parallel, gpu=H100, interconnect=link).compute
    floor = comm_floor(model, training, parallel, link)
    assert 0 < floor.exposed(c.compute_seconds) <= c.exposed_comm_seconds
    assert c.step_seconds == pytest.approx(c.compute_seconds + c.exposed_comm_seconds)
    for lower in (c.compute_seconds / 2, c.compute_seconds / 8):
        assert lower + floor.exposed(lower) <= c.compute_seconds + floor.exposed(c.compute_seconds) \
            <= c.step_seconds


# -- the estimate says what it represents and what it does not ---------------------------------------------
def test_the_estimate_names_what_it_approximates_in_its_json():
    qlora = TrainingConfig(precision="bf16-mixed", finetune="qlora", seq_len=8, quant_storage="uint8")
    d = estimate(TINY, qlora, ParallelConfig(dp=2, sharding="zero3")).to_dict()
    assert d["unmodelled"] == ["QLoRA's NF4 weights in uint8 storage under ZeRO-3 (store them in the half"
                               " dtype: quant_storage)"]
    assert "finetune=qlora r=16" in d["represents"]
    plain = estimate(TINY, TrainingConfig(seq_len=8), ParallelConfig(dp=2, sharding="fsdp-hybrid",
                                                                      hybrid_shard_size=2))
    assert plain.to_dict()["unmodelled"] == []
    assert "hsdp shard=2" in plain.represents
    memory = estimate_memory(TINY, TrainingConfig(seq_len=8, compile=True), ParallelConfig())
    assert memory.to_dict()["unmodelled"] == []  # llama-family compile fusions are modelled
    gpt = get_preset("gpt2-124m")
    assert estimate_memory(gpt, TrainingConfig(seq_len=64, compile=True)).unmodelled == (
        "torch.compile fusions of gpt2 layers (memory counted as eager)",)


def test_deepspeed_knobs_are_named_in_what_the_estimate_represents():
    m = estimate_memory(TINY, TrainingConfig(precision="bf16-mixed", seq_len=8),
                        ParallelConfig(dp=2, sharding="zero3"))
    assert "zero reduce_bucket=5e+08 overlap_comm=True grad_accum_dtype=model" in m.represents
    assert any(r.startswith("zero3 prefetch=5e+07 max_live=1e+09") for r in m.represents)


# -- rings across nodes -----------------------------------------------------------------------------
def test_a_ring_across_nodes_moves_every_nic_of_its_node_members_and_no_more_than_nvlink():
    eight_per_node = _compute(FSDP2, ParallelConfig(dp=16, sharding="fsdp-full-shard"))  # 2 nodes
    assert _bandwidth(eight_per_node, "dp") == pytest.approx(
        eight_per_node.comm_bytes["dp"] / min(8 * INTER, INTRA))
    node4 = Interconnect(intra_node_gbps=450, inter_node_gbit=400, gpus_per_node=4)
    # around TP 4 each data-parallel group has one member per node: its own NIC share only
    one = _compute(FSDP2, ParallelConfig(dp=2, tp=4, sharding="fsdp-full-shard"), node4)
    assert _bandwidth(one, "dp") == pytest.approx(one.comm_bytes["dp"] / INTER)
    # around TP 2 two members per node, sharing the node's NICs with the other group
    two = _compute(FSDP2, ParallelConfig(dp=4, tp=2, sharding="fsdp-full-shard"), node4)
    assert _bandwidth(two, "dp") == pytest.approx(two.comm_bytes["dp"] / (2 * INTER))
    # a pipeline hop leaves through the GPU's own share
    pp = _compute(FSDP2, ParallelConfig(dp=4, pp=2, sharding="fsdp-full-shard"), node4)
    assert _bandwidth(pp, "pp") == pytest.approx(pp.comm_bytes["pp"] / INTER)


# -- memory-bound kernels outside the matmul rate ---------------------------------------------------
HBM = 3350e9 * cmp.HBM_EFFICIENCY


def test_materialised_attention_scores_cost_memory_traffic_per_score_element():
    s, b = 64, 2
    base = dict(precision="bf16-mixed", seq_len=s, micro_batch=b, loss="fused")
    flash = estimate(TINY, TrainingConfig(**base, attention="flash"), ParallelConfig(), gpu=H100).compute
    eager = estimate(TINY, TrainingConfig(**base, attention="eager", dropout=0.0), ParallelConfig(),
                     gpu=H100).compute
    scores = b * HEADS * s * s * L  # score elements per step
    loss = 6 * V * b * s
    assert flash.memory_bound_seconds == pytest.approx(loss / HBM)
    assert eager.memory_bound_seconds == pytest.approx((10 * scores + loss) / HBM)  # softmax 4 + 6
    dropout = estimate(TINY, TrainingConfig(**base, attention="eager", dropout=0.1), ParallelConfig(),
                       gpu=H100).compute
    assert dropout.memory_bound_seconds == pytest.approx((20 * scores + loss) / HBM)  # + 5 + 5
    recompute = estimate(TINY, TrainingConfig(**base, attention="eager", dropout=0.1, checkpointing="full"),
                         ParallelConfig(), gpu=H100).compute
    assert recompute.memory_bound_seconds == pytest.approx((29 * scores + loss) / HBM)  # forward again
    tp2 = estimate(TINY, TrainingConfig(**base, attention="eager", dropout=0.0), ParallelConfig(tp=2),
                   gpu=H100).compute
    assert tp2.memory_bound_seconds == pytest.approx((10 * scores + loss) / 2 / HBM)  # heads, vocab / tp
    assert eager.compute_seconds - eager.memory_bound_seconds == pytest.approx(flash.compute_seconds
                                                                             - flash.memory_bound_seconds)


def test_the_loss_moves_what_its_kernels_read_and_write_per_logit():
    tokens = 2 * 64
    per = {}
    for name, knobs in (("eager", {"compile": True}), ("compiled", {"compile": True, "compile_loss": True}),
                        ("fused", {"loss": "fused"})):
        tc = TrainingConfig(precision="bf16-mixed", seq_len=64, micro_batch=2, attention="flash", **knobs)
        per[name] = estimate(TINY, tc, ParallelConfig(), gpu=H100).compute.memory_bound_seconds
    assert per == pytest.approx({"eager": 36 * V * tokens / HBM, "compiled": 12 * V * tokens / HBM,
                                 "fused": 6 * V * tokens / HBM})
    no_bandwidth = GPUSpec("planning GPU", 80 * 10**9, 989.4)  # the planning MFU covers everything
    assert estimate(TINY, TrainingConfig(seq_len=64), ParallelConfig(),
                    gpu=no_bandwidth).compute.memory_bound_seconds == 0


def test_a_given_mfu_covers_the_whole_step_and_fp8_needs_fp8_tensor_cores():
    model = get_preset("llama-3.1-8b")  # large enough that kernel launches do not bound the step
    knobs = dict(precision="bf16-mixed", seq_len=1024, micro_batch=2, attention="eager", dropout=0.1)
    modelled = estimate(model, TrainingConfig(**knobs), ParallelConfig(), gpu=H100).compute
    planned = estimate(model, TrainingConfig(**knobs, mfu=0.4), ParallelConfig(), gpu=H100).compute
    assert modelled.memory_bound_seconds > 0 and planned.memory_bound_seconds == 0
    flops = planned.hardware_flops_per_token * 2048
    assert planned.compute_seconds == pytest.approx(flops / (989.4e12 * 0.4))
    fp32 = estimate(TINY, TrainingConfig(precision="fp32", seq_len=64), ParallelConfig(), gpu=H100).compute
    assert fp32.memory_bound_seconds == 0  # the fp32 planning MFU
    a100 = GPUSpec("NVIDIA A100 40GB SXM4", 40 * 10**9, 312, None, 19.5, 1555)
    with pytest.raises(ValueError, match="no FP8 tensor cores"):
        estimate(TINY, TrainingConfig(precision="fp8", seq_len=64), ParallelConfig(), gpu=a100)


def test_every_nth_layer_checkpointing_recomputes_the_scores_of_those_layers_only():
    def score_bytes(**kw):
        training = TrainingConfig(seq_len=64, attention="eager", dropout=0.0, **kw)
        return cmp.attention_score_bytes(TINY, training)

    none, every2 = score_bytes(), score_bytes(checkpointing="full", checkpoint_every=2)
    assert every2 - none == pytest.approx(4 * HEADS * 64 * 64 * L / 2)  # the softmax forward, 2 of 4 layers


def test_a_pipeline_hop_crosses_nodes_once_the_job_spans_them():
    # FSDP 4 x PP 4 on two 8-GPU nodes: stage 2 (ranks 4-7) sends to stage 3 (ranks 8-11)
    c = _compute(FSDP2, ParallelConfig(dp=4, pp=4, sharding="fsdp-full-shard"))
    assert _bandwidth(c, "pp") == pytest.approx(c.comm_bytes["pp"] / INTER)
