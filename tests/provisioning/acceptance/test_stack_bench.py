"""bench/stack_gpu.py's MFU needs the GPU's dense bf16 peak: the names torch.cuda.get_device_name
gives are found in the catalog (from shared/reference/gpu_specs.json), form factor included."""

import importlib.util
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[3] / "bench" / "stack_gpu.py"


@pytest.fixture(scope="module")
def bench():
    spec = importlib.util.spec_from_file_location("stack_gpu_under_test", BENCH)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("device_name, tflops", [
    ("NVIDIA H200", 989.4),  # the SXM part: NVIDIA names the PCIe and NVL parts so
    ("NVIDIA H200 NVL", 835.5),
    ("NVIDIA H100 80GB HBM3", 989.4),
    ("NVIDIA H100 PCIe", 756),
    ("NVIDIA H100 NVL", 835.5),
    ("NVIDIA B200", 2250),
    ("NVIDIA A100-SXM4-80GB", 312),
    ("NVIDIA A100-PCIE-40GB", 312),
    ("NVIDIA L40S", 362.05),
    ("NVIDIA L4", 121),
])
def test_the_device_names_torch_reports_find_their_catalog_peak(bench, device_name, tflops):
    assert bench.bf16_peak_flops(device_name) == pytest.approx(tflops * 1e12)


def test_a_gpu_the_catalog_lacks_has_no_peak(bench):
    assert bench.bf16_peak_flops("Tesla V100-SXM2-16GB") is None
    assert bench.bf16_peak_flops("NVIDIA RTX A6000") is None


def test_the_estimate_is_fsdp2s_mixed_precision_layout(bench):
    """The worker runs train_smoke.py's Llama (implementation "trainyard-smoke") under
    MixedPrecisionPolicy(bf16, fp32 reduce): no per-linear autocast copies."""
    model = dict(bench.MODEL_TINY, layers=4, dim=1024, ffn=2816, seq=1024)
    fsdp2, _ = bench.estimate_for(model, micro_batch=4, checkpointing=False, world=2)
    from portal.sizing.estimator import ModelSpec, ParallelConfig, TrainingConfig, estimate_memory
    from provisioning.acceptance.probe import allocator_bytes

    spec = ModelSpec(name="stack-bench", family="llama", vocab_size=model["vocab"],
                     hidden_size=model["dim"], num_layers=model["layers"], num_heads=model["heads"],
                     intermediate_size=model["ffn"], num_kv_heads=model["kv_heads"],
                     implementation="trainyard-smoke")
    autocast = estimate_memory(spec, TrainingConfig(precision="bf16-mixed", mixed_layout="autocast",
                                                    micro_batch=4, seq_len=1024, attention="sdpa"),
                               ParallelConfig(dp=2, sharding="fsdp-full-shard")).per_gpu
    assert fsdp2 != allocator_bytes(autocast)
    assert fsdp2 == allocator_bytes(estimate_memory(
        spec, TrainingConfig(precision="bf16-mixed", mixed_layout="fsdp2", micro_batch=4,
                             seq_len=1024, attention="sdpa"),
        ParallelConfig(dp=2, sharding="fsdp-full-shard")).per_gpu)
