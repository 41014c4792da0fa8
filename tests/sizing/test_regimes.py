"""The regimes the deployed stacks run (issue 14): each knob against numbers worked out by hand
from the formulas in docs/sizing.md, on a tiny llama-family model whose tensors are easy to
count."""

import math

import pytest

from portal.sizing.estimator import (
    GPUSpec,
    Interconnect,
    ModelSpec,
    ParallelConfig,
    TrainingConfig,
    estimate,
    get_preset,
)
from portal.sizing.estimator import activations as act
from portal.sizing.estimator import compute as cmp
from portal.sizing.estimator.config import ZeroConfig

# h=64, 4 heads of 16, 2 kv heads (kv_dim 32), MLP 160, 4 layers, vocab 1000, untied head.
TINY = ModelSpec(name="tiny", family="llama", vocab_size=1000, hidden_size=64, num_layers=4, num_heads=4,
                 num_kv_heads=2, intermediate_size=160, max_position_embeddings=4096)
H, Q, KV, INTER, L, V, HEADS, HEAD_DIM = 64, 64, 32, 160, 4, 1000, 4, 16
LAYER = Q * H + 2 * KV * H + H * Q + 3 * H * INTER + 2 * H  # 4 projections, MLP, two norms
ROOT = V * H + H + V * H  # embedding, final norm, head
P = L * LAYER + ROOT
H100 = GPUSpec("NVIDIA H100 SXM5 80GB", 80 * 10**9, 989.4, 1979, 67, 3350)


def _mem(training: TrainingConfig, parallel: ParallelConfig | None = None):
    return estimate(TINY, training, parallel or ParallelConfig()).per_gpu


def test_the_tiny_model_has_the_parameters_counted_by_hand():
    assert TINY.params.total == P


# -- FSDP2 MixedPrecisionPolicy(param_dtype=bf16, reduce_dtype=fp32) ------------------------------
FSDP2 = TrainingConfig(precision="bf16-mixed", mixed_layout="fsdp2", seq_len=8)


def test_fsdp2_keeps_sharded_fp32_weights_and_grads_and_no_master_copy():
    g = _mem(FSDP2, ParallelConfig(dp=4, sharding="fsdp-full-shard"))
    assert g.weights == 4 * P // 4
    assert g.gradients == 4 * P // 4
    # AdamW: two fp32 moments + one fp32 step per tensor; no fp32 master (weights are fp32)
    tensors = 1 + L * 9 + 1 + 1  # embedding, 9 per layer, final norm, head
    assert g.optimizer_states == int((8 * P + 4 * tensors) / 4)


def test_fsdp2_buffers_root_unit_two_gathered_blocks_and_one_blocks_reduce_buffers():
    dp = 4
    g = _mem(FSDP2, ParallelConfig(dp=dp, sharding="fsdp-full-shard"))
    # root in bf16 + per block: bf16 shard (all-gather input), 2 gathered bf16 blocks,
    # bf16 unsharded grads and the fp32 reduce-scatter input of one block
    expected = 2 * ROOT + LAYER * (2 / dp + 2 * 2 + 2 + 4)
    assert g.gathered_buffers == int(expected)


def test_fsdp2_without_reshard_after_forward_keeps_every_block_gathered():
    on = _mem(FSDP2, ParallelConfig(dp=4, sharding="fsdp-full-shard"))
    off = _mem(FSDP2, ParallelConfig(dp=4, sharding="fsdp-full-shard", reshard_after_forward=False))
    assert off.gathered_buffers - on.gathered_buffers == pytest.approx(2 * LAYER * (L - 2), abs=1)


def test_fsdp2_activations_are_bf16_without_autocast_copies():
    fsdp2 = _mem(FSDP2, ParallelConfig(dp=2, sharding="fsdp-full-shard"))
    pure = _mem(TrainingConfig(precision="bf16", seq_len=8))
    assert fsdp2.activations == pure.activations


def test_fsdp2_needs_fsdp_sharding():
    with pytest.raises(ValueError, match="fsdp"):
        _mem(FSDP2, ParallelConfig(dp=2, sharding="zero3"))


# -- activation checkpointing policies --------------------------------------------------------------
def test_op_level_sac_keeps_every_other_matmul_output_and_the_attention_output():
    b, s = 2, 16
    base = {"precision": "bf16", "micro_batch": b, "seq_len": s, "attention": "sdpa"}
    op = _mem(TrainingConfig(**base, checkpointing="selective-op"))
    full = _mem(TrainingConfig(**base, checkpointing="full"))
    # per token and layer: input 2h, wq 2q, wv 2kv, attention out 2q, lse 4 per head, w1 2I, w2 2h
    kept = 2 * H + 2 * Q + 2 * KV + 2 * Q + 4 * HEADS + 2 * INTER + 2 * H
    rope = 2 * s * HEAD_DIM * 2  # cos/sin: kept unless every layer is fully checkpointed
    assert op.activations - full.activations == L * b * s * (kept - 2 * H) + rope


def test_op_level_sac_recomputes_wk_wo_and_w3():
    base = TrainingConfig(precision="bf16", seq_len=16)
    op = TrainingConfig(precision="bf16", seq_len=16, checkpointing="selective-op")
    extra = 2 * (H * KV + Q * H + H * INTER) * L
    assert cmp.hardware_flops_per_token(TINY, op) - cmp.hardware_flops_per_token(TINY, base) == extra


def test_op_level_sac_is_refused_where_it_is_not_modelled():
    with pytest.raises(ValueError, match="llama"):
        estimate(get_preset("gpt2-124m"), TrainingConfig(checkpointing="selective-op", seq_len=64))
    with pytest.raises(ValueError, match="sdpa"):
        TrainingConfig(checkpointing="selective-op", attention="eager")


def test_full_checkpointing_every_second_layer():
    b, s = 1, 32
    base = {"precision": "bf16", "micro_batch": b, "seq_len": s}
    none = _mem(TrainingConfig(**base))
    full = _mem(TrainingConfig(**base, checkpointing="full"))
    half = _mem(TrainingConfig(**base, checkpointing="full", checkpoint_every=2))
    rope = 2 * s * HEAD_DIM * 2
    per_layer_gap = (none.activations - rope - full.activations) / L
    assert half.activations - full.activations == 2 * per_layer_gap  # layers 1 and 3 not checkpointed
    model_flops = cmp.model_flops_per_token(TINY, s)
    every2 = TrainingConfig(**base, checkpointing="full", checkpoint_every=2)
    head = 6 * TINY.vocab_size * TINY.hidden_size  # the output head is not checkpointed
    assert cmp.hardware_flops_per_token(TINY, every2) == pytest.approx(
        model_flops + (model_flops - head) / 3 * 2 / 4)
    with pytest.raises(ValueError, match="checkpoint_every"):
        TrainingConfig(checkpoint_every=2)


# -- loss ----------------------------------------------------------------------------------------
def test_chunked_cross_entropy_upcasts_one_chunk_at_a_time():
    b, s = 2, 64
    e = b * s * V
    assert act.logits_backward_transient(TINY, b, s, 1, "full") == 8 * e
    # bf16 logits + one of 8 fp32 chunks (forward) vs two fp32 grads of one chunk (backward)
    assert act.logits_backward_transient(TINY, b, s, 1, "chunked", 8) == max(2 * e + 4 * e // 8, e)


def test_fused_linear_cross_entropy_keeps_no_vocabulary_sized_tensor():
    g = _mem(TrainingConfig(precision="bf16", micro_batch=2, seq_len=64, loss="fused"))
    assert g.logits_and_loss == 2 * 64 * (4 + 8)  # fp32 lse + int64 target per token
    # Liger: chunk = next_power_of_2(ceil(128 / ceil(1000 / 64))) = next_power_of_2(8) = 8 tokens
    assert act.fused_loss_chunk_tokens(TINY, 128) == 8


# -- peak moments ------------------------------------------------------------------------------------
def test_gradients_freed_by_zero_grad_do_not_sit_next_to_activations():
    tc = TrainingConfig(precision="bf16", seq_len=4)  # tiny activations: the step is the peak
    g = _mem(tc)
    allocated = g.total - g.framework_overhead
    assert allocated == g.weights + g.optimizer_states + g.gradients + g.gathered_buffers
    assert g.transient < 0  # activations and logits are gone at the step


def test_accumulated_gradients_sit_next_to_the_next_forward():
    g = _mem(TrainingConfig(precision="bf16", seq_len=4, grad_accum=2))
    assert g.transient >= 0
    assert g.total - g.framework_overhead == (g.weights + g.gradients + g.optimizer_states + g.activations
                                              + g.logits_and_loss + g.transient + g.gathered_buffers)


def test_optimizer_step_in_backward_keeps_one_gradient_at_a_time():
    g = _mem(TrainingConfig(precision="bf16", seq_len=4, optimizer_in_backward=True))
    assert g.gradients == 2 * V * H  # the largest tensor (embedding / head), bf16
    with pytest.raises(ValueError, match="grad_accum"):
        TrainingConfig(optimizer_in_backward=True, grad_accum=2)


def test_activation_offloading_keeps_one_layer_on_the_gpu():
    b, s = 1, 64
    base = {"precision": "bf16", "micro_batch": b, "seq_len": s, "checkpointing": "full"}
    est = estimate(TINY, TrainingConfig(**base, activation_offload=True))
    plain = estimate(TINY, TrainingConfig(**base))
    moved = (L - 1) * 2 * b * s * H  # all checkpointed layer inputs but one
    assert plain.per_gpu.activations - est.per_gpu.activations == moved
    assert est.cpu_bytes == moved


# -- DeepSpeed as implemented ----------------------------------------------------------------------
def test_zero3_fp32_gradient_copy_is_capped_by_sub_group_size():
    tc = TrainingConfig(precision="fp16-mixed", seq_len=1)
    whole = _mem(tc, ParallelConfig(dp=2, sharding="zero3"))
    capped = _mem(tc, ParallelConfig(dp=2, sharding="zero3", zero=ZeroConfig(sub_group_size=20_000)))
    # the step moment: fp32 copy of the partition (4 P / 2), or of one sub-group (4 x 20000)
    assert whole.transient + whole.activations + whole.logits_and_loss == pytest.approx(4 * P / 2, abs=2)
    assert capped.transient + capped.activations + capped.logits_and_loss == pytest.approx(4 * 20_000, abs=2)


def test_bf16_zero1_with_fp32_grad_accumulation_runs_deepspeeds_bf16_optimizer():
    """engine._do_optimizer_sanity_check: BF16_Optimizer only for bf16 + grad_accum_dtype fp32
    + ZeRO-1 without offload; by default grad_accum_dtype is the model dtype."""
    bf16 = TrainingConfig(precision="bf16-mixed", seq_len=8)
    fp32_accum = ParallelConfig(dp=2, sharding="zero1", zero=ZeroConfig(grad_accum_dtype="fp32"))
    g = _mem(bf16, fp32_accum)
    assert g.gradients == 2 * P + 4 * P  # bf16 grads + fp32 accumulation buffer, neither sharded
    assert _mem(bf16, ParallelConfig(dp=2, sharding="zero1")).gradients == 2 * P  # the ZeRO optimizer
    offloaded = ParallelConfig(dp=2, sharding="zero1", offload="optimizer",
                               zero=ZeroConfig(grad_accum_dtype="fp32"))
    assert _mem(bf16, offloaded).gradients == 2 * P
    fp16 = _mem(TrainingConfig(precision="fp16-mixed", seq_len=8), fp32_accum)
    assert fp16.gradients == 2 * P


# -- time -------------------------------------------------------------------------------------------
def test_interleaved_pipeline_bubble():
    assert cmp.bubble_fraction(4, 8) == pytest.approx(3 / 11)
    assert cmp.bubble_fraction(4, 8, 3) == pytest.approx(1 / 9)  # (p-1)/v = 1 idle slot of 8 + 1


def test_h200_uses_its_own_matmul_efficiency():
    h200 = cmp.matmul_efficiency("NVIDIA H200 SXM 141GB")
    assert h200 == pytest.approx(794.5 / 989 * 1453.4 / 1402.6)
    assert h200 != pytest.approx(cmp.matmul_efficiency("GH200"))
    assert cmp.matmul_efficiency("NVIDIA A100 80GB SXM4") == pytest.approx(271.2 / 312)


def test_utilisation_grows_with_width_and_with_compile():
    narrow, wide = get_preset("gpt2-124m"), get_preset("llama-3.1-70b")
    eager, compiled = TrainingConfig(), TrainingConfig(compile=True)
    assert cmp.mfu(eager, narrow, H100) < cmp.mfu(eager, wide, H100)
    assert cmp.mfu(eager, wide, H100) < cmp.mfu(compiled, wide, H100)
    # U / (1 + h0 r / h) with r = H100's FLOP/byte over A100's
    u, h0 = cmp.STACK_EFFICIENCY["eager"]
    r = 989.4e12 / 3350e9 / (312e12 / 2039e9)
    assert cmp.mfu(eager, wide, H100) == pytest.approx(794.5 / 989 * u / (1 + h0 * r / 8192))


def test_tensor_parallel_ranks_replicate_the_norms_unless_sequence_parallel_splits_them():
    model = get_preset("llama-3.1-70b")
    u, h0 = cmp.STACK_EFFICIENCY["eager"]
    r = 989.4e12 / 3350e9 / (312e12 / 2039e9)
    f = cmp.TP_REPLICATED_SHARE  # norms, dropouts, residuals; the MLP activation is split by TP

    def utilisation(parallel):  # what estimate() divides the hardware FLOPs by, over the peak
        return estimate(model, TrainingConfig(seq_len=1024), parallel, gpu=H100,
                        interconnect=Interconnect.nvlink(900)).compute.mfu

    narrow = cmp.narrowing_factor(model, 1024, 8, 1, H100)  # TP 8's thinner matmuls (test_scale_principles)
    assert utilisation(ParallelConfig(tp=8)) == pytest.approx(
        794.5 / 989 * u / (1 + h0 * r * (f * 8 + 1 - f) / 8192) / narrow)
    assert ParallelConfig(tp=8, sp=True).replicated_tp == 1
    assert utilisation(ParallelConfig(tp=8, sp=True)) == pytest.approx(utilisation(ParallelConfig()) / narrow)


def test_full_recompute_is_counted_as_hardware_flops():
    model = get_preset("llama-3.1-8b")
    link = Interconnect.nvlink(900)
    none = estimate(model, TrainingConfig(seq_len=4096), ParallelConfig(), gpu=H100, interconnect=link)
    full = estimate(model, TrainingConfig(seq_len=4096, checkpointing="full"), ParallelConfig(), gpu=H100,
                    interconnect=link)
    def matmul_seconds(c):  # the memory-bound loss (no recompute) aside
        return c.compute_seconds - c.memory_bound_seconds

    def charged_flops(est):  # the attention FLOPs at their kernel's rate (test_scale_principles)
        training = est.memory.training
        extra = cmp.attention_slowdown(training, H100, model) - 1
        return est.compute.hardware_flops_per_token + extra * cmp.attention_flops_per_token(model, training)

    assert none.compute.memory_bound_seconds == full.compute.memory_bound_seconds > 0
    assert matmul_seconds(full.compute) / matmul_seconds(none.compute) == pytest.approx(
        charged_flops(full) / charged_flops(none))


def test_pipeline_stages_do_not_make_a_small_model_faster():
    model = get_preset("gpt2-124m")
    link = Interconnect.nvlink(900)
    times = {}
    for pp in (1, 2, 4, 8):
        est = estimate(model, TrainingConfig(micro_batch=1, seq_len=1024, grad_accum=64, attention="flash"),
                       ParallelConfig(dp=8 // pp, pp=pp), gpu=H100, interconnect=link)
        times[pp] = est.compute.tokens_per_second
    assert times[8] < times[1]
    assert max(times, key=times.get) == 1


def test_float8_speeds_up_the_linear_matmuls_only():
    model = get_preset("llama-3.1-8b")
    tc = TrainingConfig(seq_len=8192, compile=True)
    factor = cmp.fp8_time_factor(TrainingConfig(precision="fp8", seq_len=8192, compile=True), model, H100)
    assert 0.5 < factor < 1  # faster, but less than the 2x peak
    bf16 = estimate(model, tc, gpu=H100).compute
    fp8 = estimate(model, TrainingConfig(precision="fp8", seq_len=8192, compile=True), gpu=H100).compute
    assert fp8.memory_bound_seconds == bf16.memory_bound_seconds  # the loss stays in bf16
    assert fp8.compute_seconds - fp8.memory_bound_seconds == pytest.approx(
        (bf16.compute_seconds - bf16.memory_bound_seconds) * factor, rel=1e-9)
    assert math.isfinite(factor)


def test_the_estimate_says_which_regime_it_represents():
    from portal.sizing.estimator import estimate_memory
    m = estimate_memory(TINY, TrainingConfig(precision="bf16-mixed", mixed_layout="fsdp2", seq_len=8,
                                             checkpointing="selective-op", compile=True),
                        ParallelConfig(dp=2, sharding="fsdp-full-shard"))
    assert "layout=fsdp2" in m.represents
    assert "checkpointing=selective-op" in m.represents
    assert "stack=compiled" in m.represents
    assert "gradients freed between steps" in m.represents
