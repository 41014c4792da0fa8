"""PEFT's DoRA (TrainingConfig.use_dora; tuners/lora/dora.py at 5d602fd): what it adds to LoRA, in
numbers. Its saved activations are measured against a replica of PEFT's forward in
tests/sizing/test_lora_frozen_activations.py (test_saved_bytes_match_peft_style_dora), its eager
traffic against the same replica here, op by op."""

from dataclasses import replace

import pytest
import torch

from portal.sizing.estimator import (
    GPUSpec,
    Interconnect,
    ParallelConfig,
    TrainingConfig,
    estimate,
    get_preset,
)
from portal.sizing.estimator.activations import DT_HALF, dora_weight_transient
from portal.sizing.estimator.compute import DORA_BYTES, DORA_DROPOUT_BYTES, hardware_flops_per_token
from tests.sizing.measure import MovedBytes
from tests.sizing.peft_replica import DoraLinear, LoraLinear

H100 = GPUSpec("H100 SXM", memory_bytes=80 * 10**9, bf16_tflops=989.4, fp8_tflops=1979, fp32_tflops=67,
               memory_bandwidth_gbps=3350)
LORA = TrainingConfig(precision="bf16", finetune="lora", lora_rank=32, lora_targets=("q_proj", "v_proj"),
                      micro_batch=2, seq_len=1024)


def test_each_adapted_linear_gains_a_magnitude_vector_and_keeps_its_two_outputs():
    m = get_preset("llama-3.1-8b")
    lora, dora = estimate(m, LORA), estimate(m, replace(LORA, use_dora=True))
    widths = m.q_dim + m.kv_dim  # q_proj's and v_proj's output features
    assert dora.params.trainable - lora.params.trainable == m.num_layers * widths
    tokens = 2 * 1024
    extra = dora.per_gpu.activations - lora.per_gpu.activations
    assert extra == m.num_layers * (2 * 2 * tokens + 3 * 2) * widths  # base and adapter outputs, 3 vectors


def test_its_weight_norm_comes_back_with_the_recomputed_layer():
    """W + s * BA and the identity run through the adapter exist for a moment at every call: under
    full recompute next to the recomputed layer's backward (the widest adapted linear's)."""
    m = replace(get_preset("llama-3.1-8b"), vocab_size=1024)  # the loss's own moment far smaller
    ckpt = replace(LORA, checkpointing="full", lora_targets=("down_proj",), use_dora=True)
    eye = 2 * m.intermediate_size ** 2  # down_proj reads the MLP width
    weight_sized = 3 * 2 * m.intermediate_size * m.hidden_size  # BA, s * BA, W + s * BA
    assert dora_weight_transient(m, ckpt, DT_HALF, 1) == eye + weight_sized
    dora, lora = estimate(m, ckpt).per_gpu, estimate(m, replace(ckpt, use_dora=False)).per_gpu
    magnitudes = dora.gradients - lora.gradients
    recomputed_outputs = (2 * 2 * 2 * 1024 + 3 * 2) * m.hidden_size  # down_proj's two outputs, 3 vectors
    assert dora.transient - lora.transient + magnitudes == eye + weight_sized + recomputed_outputs


@pytest.mark.parametrize("knobs, model, why", [
    ({"finetune": "qlora"}, "llama-3.1-8b", "use_dora is PEFT's DoRA on LoRA adapters"),
    ({"lora_targets": ("q_proj", "lm_head")}, "llama-3.1-8b", "DoRA on the output head"),
    ({}, "mixtral-8x7b", "modelled on the dense llama family's linears"),
    ({}, "gpt2-124m", "modelled on the dense llama family's linears"),
])
def test_what_it_is_not_modelled_for_is_refused_in_words(knobs, model, why):
    with pytest.raises(ValueError, match=why):
        estimate(get_preset(model), replace(LORA, use_dora=True, **knobs))


LAYOUTS = {"half": (torch.bfloat16, False), "fp32": (torch.float32, False), "autocast": (torch.float32, True)}


@pytest.mark.parametrize("layout", list(LAYOUTS))
@pytest.mark.parametrize("dropout", [0.0, 0.05])
@pytest.mark.parametrize("d_in, d_out, tokens", [(1024, 512, 256), (512, 1536, 128)])
def test_its_eager_traffic_beyond_lora_is_counted_op_by_op(layout, dropout, d_in, d_out, tokens):
    """What PEFT's DoRA reads and writes beyond LoRA in one forward and one backward of a linear
    (the replica of dora.py and variants.py, every kernel counted as it runs; autocast as CPU
    autocast runs it): DORA_BYTES, and DORA_DROPOUT_BYTES with LoRA dropout, whose second frozen
    matmul moves its own operands besides (its time is its FLOPs), within the rank's and the
    vectors' small terms."""
    dtype, autocast = LAYOUTS[layout]

    def moved(cls) -> tuple[int, int]:
        torch.manual_seed(0)
        base = torch.nn.Linear(d_in, d_out, bias=False, dtype=dtype).requires_grad_(False)
        layer, x = cls(base, 8, dropout), torch.randn(tokens, d_in, dtype=dtype, requires_grad=True)
        with MovedBytes() as forward, torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
            y = layer(x)
        with MovedBytes() as backward:
            y.sum().backward()
        return forward.bytes, backward.bytes

    identity, weight, fwd, bwd = DORA_BYTES[layout]
    weight_d, fwd_in, bwd_d, bwd_in = DORA_DROPOUT_BYTES[layout] if dropout else (0, 0, 0, 0)
    # the second frozen matmul's own operands, forward and for the input's gradient
    matmul = (2 if autocast else dtype.itemsize) * (d_in * tokens + d_out * d_in + d_out * tokens)
    matmul = matmul if dropout else 0
    forward = (identity * d_in ** 2 + (weight + weight_d) * d_out * d_in
               + (fwd * d_out + fwd_in * d_in) * tokens)
    backward = ((bwd + bwd_d) * d_out + bwd_in * d_in) * tokens
    (dora_f, dora_b), (lora_f, lora_b) = moved(DoraLinear), moved(LoraLinear)
    assert dora_f - lora_f == pytest.approx(forward + matmul, rel=0.01)
    assert dora_b - lora_b == pytest.approx(backward + matmul, rel=0.01)


def test_its_traffic_is_step_time_per_micro_batch_per_token_and_per_stage():
    """DoRA's traffic is memory-bound time on top of LoRA's step: the weight norm once per
    micro-batch (fewer, larger micro-batches pay it less often) and again in the layers full
    recompute runs twice; a pipeline stage pays for its own layers; fp32 adapters under autocast
    move more than half ones."""
    m, gpu = get_preset("llama-3.1-8b"), H100

    def extra(training: TrainingConfig, parallel: ParallelConfig | None = None) -> float:
        parallel = parallel or ParallelConfig()
        dora, lora = (estimate(m, t, parallel, gpu=gpu, interconnect=Interconnect.nvlink(900)).compute
                      for t in (replace(training, use_dora=True), training))
        assert dora.model_flops_per_token == lora.model_flops_per_token
        assert dora.step_seconds > lora.step_seconds
        return dora.memory_bound_seconds - lora.memory_bound_seconds

    base = replace(LORA, micro_batch=1, grad_accum=8)
    assert extra(base) > extra(replace(base, micro_batch=8, grad_accum=1)) > 0
    every_layer = extra(replace(base, checkpointing="full"))
    assert every_layer > extra(replace(base, checkpointing="full", checkpoint_every=2)) > extra(base)
    assert extra(base, ParallelConfig(pp=2)) == pytest.approx(extra(base) / 2, rel=1e-12)
    assert extra(replace(base, precision="bf16-mixed")) > extra(base)  # the ddp stack's autocast


def test_with_lora_dropout_it_runs_the_frozen_matmul_again():
    """PEFT passes DoRA no base output when dropout drops the input: F.linear(x, W) runs again, a
    forward (again in the layers full recompute checkpoints) and the input's gradient."""
    m = get_preset("llama-3.1-8b")
    weights = m.num_layers * (m.q_dim + m.kv_dim) * m.hidden_size
    for checkpointing, every, runs in (("none", 1, 1), ("full", 1, 2), ("full", 4, 1.25)):
        t = replace(LORA, use_dora=True, lora_dropout=0.05, checkpointing=checkpointing,
                    checkpoint_every=every)
        dropped = hardware_flops_per_token(m, t) - hardware_flops_per_token(m, replace(t, use_dora=False))
        assert dropped == pytest.approx(2 * weights * (runs + 1), rel=1e-12)
        assert hardware_flops_per_token(m, replace(t, lora_dropout=0.0)) == hardware_flops_per_token(
            m, replace(t, use_dora=False, lora_dropout=0.0))


def test_a_time_the_caller_fixes_with_an_mfu_is_kept_and_fp32_still_pays_for_it():
    m = get_preset("llama-3.1-8b")

    def step(training: TrainingConfig) -> float:
        return estimate(m, training, gpu=H100, interconnect=Interconnect.nvlink(900)).compute.step_seconds

    given = replace(LORA, mfu=0.4)
    assert step(replace(given, use_dora=True)) == step(given)
    fp32 = replace(LORA, precision="fp32")  # a planning MFU that knows nothing of DoRA
    assert step(replace(fp32, use_dora=True)) > step(fp32)


def test_tensor_parallelism_and_op_level_recompute_are_refused_in_words():
    with pytest.raises(ValueError, match="tp_layer.py, refuses use_dora"):
        estimate(get_preset("llama-3.1-8b"), replace(LORA, use_dora=True), ParallelConfig(tp=2))
    with pytest.raises(ValueError, match="not counted under op-level recompute"):
        estimate(get_preset("llama-3.1-8b"), replace(LORA, use_dora=True, checkpointing="selective-op"))
