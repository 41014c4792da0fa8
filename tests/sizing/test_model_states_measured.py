"""Weights, gradients and optimizer state after one real optimizer step: within 1%."""

import pytest

# Measured against real torch models: without torch (the `ml` extra) these are skipped.
torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from portal.sizing.estimator import TrainingConfig, estimate  # noqa: E402

from .measure import build, hf_config, model_states_after_step, spec_of  # noqa: E402

pytestmark = pytest.mark.torch

CASES = [
    ("llama", {"hidden": 128, "heads": 4, "kv_heads": 2, "inter": 352}),
    ("qwen2", {"hidden": 96, "heads": 6, "kv_heads": 2, "inter": 256}),
    ("mixtral", {"hidden": 64, "heads": 4, "kv_heads": 2, "inter": 96}),
    ("gpt2", {"hidden": 128, "heads": 4}),
    ("bert", {"hidden": 128, "heads": 4}),
]


def _sgd(params, lr):
    return torch.optim.SGD(params, lr=lr, momentum=0.9)


@pytest.mark.parametrize("family, shape", CASES)
@pytest.mark.parametrize(
    "precision, dtype, optimizer, torch_opt",
    [
        ("fp32", "float32", "adamw", None),
        ("bf16", "bfloat16", "adamw", None),
        ("fp32", "float32", "sgd-momentum", _sgd),
    ],
)
def test_model_states_match_after_one_step(family, shape, precision, dtype, optimizer,
                                           torch_opt):
    cfg, cls = hf_config(family, **shape)
    model = build(cfg, cls, getattr(torch, dtype))
    measured = model_states_after_step(model, torch_opt or torch.optim.AdamW)
    est = estimate(spec_of(cfg), TrainingConfig(precision=precision, optimizer=optimizer, seq_len=16))
    for key in ("weights", "gradients", "optimizer_states"):
        ours = getattr(est.per_gpu, key)
        assert ours == pytest.approx(measured[key], rel=0.01), key


def test_autocast_layout_keeps_fp32_states_like_an_fp32_model():
    cfg, cls = hf_config("llama")
    measured = model_states_after_step(build(cfg, cls))  # autocast does not change states
    est = estimate(spec_of(cfg), TrainingConfig(precision="bf16-mixed", mixed_layout="autocast", seq_len=16))
    assert est.layout == "autocast"
    for key in ("weights", "gradients", "optimizer_states"):
        assert getattr(est.per_gpu, key) == pytest.approx(measured[key], rel=0.01), key
