"""Sliding-window attention as transformers 5.24 runs it, measured: bytes saved for backward by one
real forward with the loss (tests/sizing/measure.py) against the estimate, to the byte but for the
embedding scale's scalar (Gemma) and the loss's. Under SDPA a sliding layer keeps a mask in q's
dtype and k and v repeated to every head once the sequence reaches the window (views with one kv
head); below it, nothing more (activations.sliding_window_masks)."""

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from portal.sizing.estimator import TrainingConfig, estimate  # noqa: E402

from .measure import MODES, build, hf_config, saved_for_backward, spec_of  # noqa: E402

pytestmark = pytest.mark.torch

CASES = [  # (family, shape, micro-batch, sequence)
    ("mistral", {"hidden": 128, "heads": 4, "kv_heads": 2, "window": 32}, 2, 64),  # past the window
    ("mistral", {"hidden": 128, "heads": 4, "kv_heads": 2, "window": 64}, 2, 64),  # at it: a mask
    ("mistral", {"hidden": 128, "heads": 4, "kv_heads": 2, "window": 65}, 2, 64),  # below: is_causal
    ("mistral", {"hidden": 64, "heads": 4, "kv_heads": 1, "window": 16}, 3, 48),  # one kv head: views
    ("phi3", {"hidden": 96, "heads": 6, "kv_heads": 6, "window": 24}, 1, 64),
    ("gemma3_text", {"hidden": 128, "heads": 4, "kv_heads": 2, "layers": 3, "window": 16, "pattern": 3},
     2, 48),
    ("gemma3_text", {"hidden": 64, "heads": 4, "kv_heads": 1, "layers": 3, "window": 96, "pattern": 3},
     2, 96),
    ("gemma3_text", {"hidden": 64, "heads": 2, "kv_heads": 1, "layers": 2, "window": 128}, 1, 96),
]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("attn", ["sdpa", "eager"])
@pytest.mark.parametrize("family, shape, batch, seq", CASES)
def test_sliding_layers_keep_what_the_estimate_counts(family, shape, batch, seq, attn, mode):
    precision, dtype, autocast = MODES[mode]
    cfg, cls = hf_config(family, attn, **shape)
    measured, _ = saved_for_backward(build(cfg, cls, getattr(torch, dtype)), batch, seq, autocast=autocast)
    spec = spec_of(cfg)
    assert spec.sliding_window == shape["window"] and spec.sliding_layers > 0
    est = estimate(spec, TrainingConfig(precision=precision, micro_batch=batch, seq_len=seq, attention=attn,
                                        checkpointing="none")).per_gpu
    assert 0 <= measured - (est.activations + est.logits_and_loss) <= 16
