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
from portal.sizing.estimator.compute import (
    DORA_OUTPUT_PASSES,
    DORA_WEIGHT_PASSES,
    HBM_EFFICIENCY,
    hardware_flops_per_token,
)
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


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
@pytest.mark.parametrize("d_in, d_out, tokens, rank", [(1024, 512, 256, 8), (512, 1536, 128, 16)])
def test_its_eager_traffic_beyond_lora_is_counted_op_by_op(dtype, d_in, d_out, tokens, rank):
    """What PEFT's DoRA reads and writes beyond LoRA in one forward and backward of a linear (the
    replica of dora.py and variants.py, every kernel counted as it runs): the identity through
    the adapter, seven weight-sized and 7 + 15 output-sized passes, within the rank's and the
    vectors' small terms."""
    def moved(cls) -> int:
        torch.manual_seed(0)
        base = torch.nn.Linear(d_in, d_out, bias=False, dtype=dtype).requires_grad_(False)
        layer, x = cls(base, rank), torch.randn(tokens, d_in, dtype=dtype, requires_grad=True)
        with MovedBytes() as counter:
            layer(x).sum().backward()
        return counter.bytes

    fwd, bwd = DORA_OUTPUT_PASSES
    elems = 2 * d_in ** 2 + DORA_WEIGHT_PASSES * d_out * d_in + (fwd + bwd) * d_out * tokens
    counted = moved(DoraLinear) - moved(LoraLinear)
    assert counted == pytest.approx(elems * torch.tensor([], dtype=dtype).element_size(), rel=0.01)


def test_it_costs_step_time_per_micro_batch_and_per_token():
    """DoRA's traffic is memory-bound time on top of LoRA's step: the weight norm once per
    micro-batch (fewer, larger micro-batches pay it less often), the output scaling per token."""
    m, gpu = get_preset("llama-3.1-8b"), H100

    def extra(micro_batch: int, grad_accum: int) -> float:
        t = replace(LORA, micro_batch=micro_batch, grad_accum=grad_accum, use_dora=True)
        dora, lora = (estimate(m, t, gpu=gpu, interconnect=Interconnect.nvlink(900)).compute
                      for t in (t, replace(t, use_dora=False)))
        assert dora.model_flops_per_token == lora.model_flops_per_token
        return dora.memory_bound_seconds - lora.memory_bound_seconds

    bandwidth = gpu.memory_bandwidth_gbps * 1e9 * HBM_EFFICIENCY
    widths = {"q_proj": m.q_dim, "v_proj": m.kv_dim}
    weight = sum(2 * m.hidden_size ** 2 + DORA_WEIGHT_PASSES * w * m.hidden_size for w in widths.values())
    per_token = sum(DORA_OUTPUT_PASSES) * sum(widths.values())
    for micro_batch, grad_accum in ((1, 8), (8, 1)):
        expected = 2 * m.num_layers * (grad_accum * weight + 8 * 1024 * per_token) / bandwidth
        assert extra(micro_batch, grad_accum) == pytest.approx(expected, rel=1e-9)
    assert extra(1, 8) > extra(8, 1)


def test_with_lora_dropout_it_runs_the_frozen_matmul_again():
    """PEFT passes DoRA no base output when dropout drops the input: F.linear(x, W) runs again, a
    forward (twice under full recompute) and the input's gradient."""
    m = get_preset("llama-3.1-8b")
    weights = m.num_layers * (m.q_dim + m.kv_dim) * m.hidden_size
    for checkpointing, runs in (("none", 1), ("full", 2)):
        t = replace(LORA, use_dora=True, lora_dropout=0.05, checkpointing=checkpointing)
        dropped = hardware_flops_per_token(m, t) - hardware_flops_per_token(m, replace(t, use_dora=False))
        assert dropped == 2 * weights * (runs + 1)
        assert hardware_flops_per_token(m, replace(t, lora_dropout=0.0)) == hardware_flops_per_token(
            m, replace(t, use_dora=False, lora_dropout=0.0))


def test_tensor_parallelism_is_refused_as_peft_refuses_it():
    with pytest.raises(ValueError, match="tp_layer.py, refuses use_dora"):
        estimate(get_preset("llama-3.1-8b"), replace(LORA, use_dora=True), ParallelConfig(tp=2))
