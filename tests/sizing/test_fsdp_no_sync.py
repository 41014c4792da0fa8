"""Gradient accumulation under FSDP's no_sync() (``ParallelConfig.fsdp_no_sync``).

torch FSDP's ``no_sync()`` (FSDP2: ``set_requires_gradient_sync(False)``), which Lightning
Fabric's ``no_backward_sync`` enters for every micro-batch but the last: "FSDP will accumulate
the full model gradients (instead of gradient shards) until the eventual sync". Each GPU holds
the whole model's gradients while micro-batches accumulate, and the gradients are
reduce-scattered once per step instead of once per micro-batch; the weights are still gathered
for every micro-batch.
"""

import pytest

from portal.sizing.estimator import ParallelConfig, TrainingConfig, estimate, get_preset
from portal.sizing.estimator.api import comm_volume
from portal.sizing.estimator.memory import ALLOCATOR_FRAGMENTATION

MODEL = get_preset("llama-2-7b")


def _training(grad_accum: int) -> TrainingConfig:
    return TrainingConfig(precision="bf16", micro_batch=1, seq_len=512, grad_accum=grad_accum)


def _fsdp(no_sync: bool, **knobs) -> ParallelConfig:
    return ParallelConfig(dp=4, sharding="fsdp-full-shard", fsdp_no_sync=no_sync, **knobs)


def test_accumulating_under_no_sync_keeps_the_whole_models_gradients_on_every_gpu():
    sharded = estimate(MODEL, _training(4), _fsdp(False)).per_gpu
    whole = estimate(MODEL, _training(4), _fsdp(True)).per_gpu
    assert whole.gradients == pytest.approx(4 * sharded.gradients, rel=1e-6)  # not split over 4 GPUs
    more = (whole.gradients - sharded.gradients) * (1 + ALLOCATOR_FRAGMENTATION)  # nothing else grows
    assert whole.total - sharded.total == pytest.approx(more, rel=1e-6)
    assert whole.weights == sharded.weights and whole.optimizer_states == sharded.optimizer_states


def test_without_accumulation_no_sync_changes_nothing():
    one = _training(1)
    assert estimate(MODEL, one, _fsdp(True)).per_gpu == estimate(MODEL, one, _fsdp(False)).per_gpu


def test_no_sync_gathers_every_micro_batch_and_reduce_scatters_once_per_step():
    def dp_bytes(grad_accum: int, no_sync: bool) -> float:
        return comm_volume(MODEL, _training(grad_accum), _fsdp(no_sync)).volume["dp"]

    gathers = (dp_bytes(4, True) - dp_bytes(1, True)) / 3  # one micro-batch's all-gathers
    reduce_scatter = dp_bytes(1, False) - gathers
    assert gathers > 0 and reduce_scatter > 0
    assert dp_bytes(4, False) == pytest.approx(4 * gathers + 4 * reduce_scatter)
    assert dp_bytes(4, True) == pytest.approx(4 * gathers + reduce_scatter)
    calls = comm_volume(MODEL, _training(4), _fsdp(True)).calls["dp"]
    default_calls = comm_volume(MODEL, _training(4), _fsdp(False)).calls["dp"]
    units = MODEL.num_layers + 1
    assert dict(default_calls)["gather"] - dict(calls)["gather"] == 3 * units  # 3 fewer reduce-scatters


def test_an_hsdp_replica_all_reduce_happens_once_per_step_too():
    def replicate_bytes(no_sync: bool) -> float:
        parallel = ParallelConfig(dp=16, sharding="fsdp-hybrid", hybrid_shard_size=8, fsdp_no_sync=no_sync)
        return comm_volume(MODEL, _training(4), parallel).volume["dp_replicate"]

    assert replicate_bytes(False) == pytest.approx(4 * replicate_bytes(True))


@pytest.mark.parametrize("knobs", [{"sharding": "zero3"}, {"sharding": "none", "dp": 1},
                                   {"sharding": "fsdp-full-shard", "offload": "optimizer"}])
def test_no_sync_is_an_fsdp_setting_without_offload(knobs):
    with pytest.raises(ValueError, match="no_sync"):
        ParallelConfig(**{"dp": 4, **knobs, "fsdp_no_sync": True})


def test_an_estimate_says_it_models_no_sync():
    assert "fsdp no_sync" in estimate(MODEL, _training(4), _fsdp(True)).represents
