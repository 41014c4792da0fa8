"""Sharded-state regimes as the stacks implement them (issue 14): DeepSpeed's buffers and
gradient accumulation dtype, FSDP2's reduce dtype and float8 all-gather, QLoRA under FSDP,
context parallelism's memory. Expectations are worked out by hand on the tiny llama-family
model of test_regimes.py (its tensors are listed there)."""

import pytest

from portal.sizing.estimator import ParallelConfig, TrainingConfig, ZeroConfig, estimate, estimate_memory
from portal.sizing.estimator.dtypes import NF4_DOUBLE_QUANT_BYTES
from tests.sizing.test_regimes import KV, LAYER, ROOT, TINY, L, P, V

H, INTER = 64, 160
NORMS = 2 * L * H + H  # two norms per layer and the final norm: the only tensors under 100 elements
LINEAR = 2 * H * H + 2 * KV * H + 3 * H * INTER  # one layer's linears: q, o (64x64), k, v (32x64), MLP
HALF = TrainingConfig(precision="fp16-mixed", seq_len=8)  # DeepSpeed's master layout, half weights


def _mem(training, parallel):
    return estimate(TINY, training, parallel).per_gpu


# -- DeepSpeed ZeRO-3: what the PartitionedParameterCoordinator keeps gathered -----------------------
def test_zero3_keeps_persistent_parameters_the_reuse_window_the_current_module_and_the_prefetch():
    z = ZeroConfig(param_persistence_threshold=100, max_reuse_distance=20_000, prefetch_bucket_size=5_000,
                   max_live_parameters=12_000, reduce_bucket_size=3_000)
    g = _mem(HALF, ParallelConfig(dp=4, sharding="zero3", zero=z))
    persistent = NORMS  # 576 elements below the threshold stay gathered
    retained = 20_000 // 2  # reused within the reuse distance around the forward/backward turn
    largest = V * H  # the embedding / head, gathered whole while computed
    prefetch = min(5_000, 12_000 - retained)  # within max_live_parameters
    reduce_bucket = 3_000
    gradient = largest  # that module's unsharded gradient before the bucket
    assert g.gathered_buffers == 2 * (persistent + retained + largest + prefetch + reduce_bucket + gradient)


def test_zero3_keeps_a_model_smaller_than_half_the_reuse_distance_gathered_whole():
    g = _mem(HALF, ParallelConfig(dp=4, sharding="zero3", zero=ZeroConfig(param_persistence_threshold=100)))
    # 1e9 / 2 >> P: every partitioned parameter stays gathered; the reduce bucket holds all P
    assert g.gathered_buffers == 2 * (NORMS + (P - NORMS) + P + V * H)


def test_zero12_keep_two_reduce_buckets_with_overlap_comm_one_without_none_without_contiguous():
    def bucket(**z):
        zero = ZeroConfig(reduce_bucket_size=1_000, **z)
        return _mem(HALF, ParallelConfig(dp=4, sharding="zero2", zero=zero))

    assert bucket(overlap_comm=True).gathered_buffers == 2 * 1_000 * 2
    assert bucket(overlap_comm=False).gathered_buffers == 1 * 1_000 * 2
    assert bucket().gathered_buffers == 1_000 * 2  # DeepSpeed's default: overlap only for stage 3
    assert bucket(contiguous_gradients=False).gathered_buffers == 0


def test_fp32_gradient_accumulation_in_zero2_and_zero3():
    fp32 = ZeroConfig(grad_accum_dtype="fp32")
    two = _mem(HALF, ParallelConfig(dp=4, sharding="zero2", zero=fp32))
    assert two.gradients == pytest.approx(2 * P / 4 + 4 * P / 4, abs=2)  # half partition + fp32 copy
    three = _mem(HALF, ParallelConfig(dp=4, sharding="zero3", zero=fp32))
    assert three.gradients == pytest.approx(4 * P / 4, abs=1)  # the partition buffer itself is fp32
    assert _mem(HALF, ParallelConfig(dp=4, sharding="zero3")).gradients == pytest.approx(2 * P / 4, abs=1)


def test_zero_config_refuses_what_deepspeed_refuses():
    with pytest.raises(ValueError, match="grad_accum_dtype"):
        ZeroConfig(grad_accum_dtype="int8")
    with pytest.raises(ValueError, match="reduce_bucket_size"):
        ZeroConfig(reduce_bucket_size=-1)
    with pytest.raises(ValueError, match="ZeroConfig"):
        ParallelConfig(zero={"stage": 3})


# -- FSDP2 --------------------------------------------------------------------------------------------
FSDP2 = TrainingConfig(precision="bf16-mixed", mixed_layout="fsdp2", seq_len=8)


def test_fsdp2_reduce_scatter_input_follows_the_reduce_dtype():
    fp32 = _mem(FSDP2, ParallelConfig(dp=4, sharding="fsdp-full-shard")).gathered_buffers
    bf16_reduce = ParallelConfig(dp=4, sharding="fsdp-full-shard", fsdp_reduce_dtype="bf16")
    bf16 = _mem(FSDP2, bf16_reduce).gathered_buffers
    assert fp32 - bf16 == pytest.approx(LAYER * (4 - 2), abs=1)  # one block's reduce-scatter input


def test_a_pipeline_stage_accumulates_its_unsharded_gradients_in_the_reduce_dtype():
    """torch.distributed.pipelining turns FSDP's gradient sync off until the last micro-batch:
    every block of the stage keeps its unsharded gradient, upcast to the reduce dtype."""
    pc = ParallelConfig(dp=2, pp=2, sharding="fsdp-full-shard", reshard_after_forward=False)
    g = _mem(TrainingConfig(precision="bf16-mixed", mixed_layout="fsdp2", seq_len=8, grad_accum=4), pc)
    stage_layers = L // 2
    gathered = LAYER * (2 / 2 + 2 * stage_layers)  # all-gather input, the stage's bf16 blocks
    grads = LAYER * (2 + 4 * stage_layers) + ROOT * 4  # the block's bf16 gradient, fp32 accumulators
    assert g.gathered_buffers == int(2 * ROOT + gathered + grads)


def test_float8_all_gather_keeps_gathered_linear_weights_in_one_byte():
    fp8 = TrainingConfig(precision="fp8", mixed_layout="fsdp2", seq_len=8, float8_all_gather=True)
    dp = 4
    g = _mem(fp8, ParallelConfig(dp=dp, sharding="fsdp-full-shard"))
    gathered = (LINEAR * 1 + (LAYER - LINEAR) * 2) / LAYER  # bytes per gathered block element
    expected = 2 * ROOT + LAYER * (gathered / dp + gathered * 2 + 2 + 4)
    assert g.gathered_buffers == int(expected)
    with pytest.raises(ValueError, match="tensorwise"):
        TrainingConfig(precision="fp8", float8_recipe="rowwise", float8_all_gather=True)


def test_qlora_nf4_weights_in_uint8_storage_stay_whole_under_fsdp():
    """Accelerate's fsdp2_prepare_model leaves bitsandbytes' uint8 NF4 storage out of fully_shard:
    the NF4 layer linears stay whole on every GPU, the bf16 rest and the adapters are sharded.
    (Stored in bf16, the default under weight sharding, they are sharded: test_scale_principles.)"""
    q = TrainingConfig(precision="bf16-mixed", finetune="qlora", seq_len=8, quant_storage="uint8")
    dp = 4
    g = _mem(q, ParallelConfig(dp=dp, sharding="fsdp-full-shard"))
    adapters = L * (2 * 16 * 64 + 2 * (16 * 64 + 32 * 16) + 2 * 16 * 64)  # r=16 on q, k, v, o
    nf4 = NF4_DOUBLE_QUANT_BYTES * L * LINEAR
    rest = 2 * (P - L * LINEAR)  # embedding, norms, head in bf16
    assert g.weights == pytest.approx(4 * adapters / dp + nf4 + rest / dp, abs=2)


# -- context parallelism ------------------------------------------------------------------------------
def test_context_parallel_ranks_keep_their_share_of_the_sequence_and_fsdp_shards_over_dp_x_cp():
    titan = TrainingConfig(precision="bf16-mixed", mixed_layout="fsdp2", seq_len=64, attention="flash")
    cp2 = estimate_memory(TINY, titan, ParallelConfig(dp=2, cp=2, sharding="fsdp-full-shard"))
    half_seq = estimate_memory(TINY, TrainingConfig(precision="bf16-mixed", mixed_layout="fsdp2", seq_len=32,
                                                    attention="flash"),
                               ParallelConfig(dp=4, sharding="fsdp-full-shard"))
    assert cp2.per_gpu.activations == half_seq.per_gpu.activations
    assert cp2.per_gpu.logits_and_loss == half_seq.per_gpu.logits_and_loss
    assert cp2.per_gpu.weights == 4 * P // 4  # fp32 weights sharded over dp x cp = 4 ranks
    assert cp2.world_size == 4
    assert "cp=2 ring attention" in cp2.represents


def test_context_parallelism_is_refused_where_ring_attention_cannot_run():
    with pytest.raises(ValueError, match="sdpa"):
        estimate(TINY, TrainingConfig(seq_len=64, attention="eager"), ParallelConfig(dp=2, cp=2,
                                                                                       sharding="fsdp-full-shard"))
    with pytest.raises(ValueError, match="2 x cp"):
        estimate(TINY, TrainingConfig(seq_len=66), ParallelConfig(dp=2, cp=2, sharding="fsdp-full-shard"))


def test_a_pipeline_stage_accumulates_gradients_of_the_trainable_tensors_only():
    pc = ParallelConfig(dp=2, pp=2, sharding="fsdp-full-shard", reshard_after_forward=False)
    base = dict(precision="bf16-mixed", mixed_layout="fsdp2", seq_len=8, grad_accum=4)
    full = _mem(TrainingConfig(**base), pc).gathered_buffers
    lora = TrainingConfig(**base, finetune="lora", lora_rank=4)
    adapters = estimate_memory(TINY, lora, pc).params.trainable / L  # adapter elements per layer
    assert adapters > 0
    stage_layers = L // 2
    weights = 2 * ROOT + LAYER * (2 / 2 + 2 * stage_layers)  # as in the full fine-tuning test
    assert _mem(lora, pc).gathered_buffers == int(weights + adapters * (2 + 4 * stage_layers))
    assert _mem(lora, pc).gathered_buffers < full
