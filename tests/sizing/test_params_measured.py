"""Parameter counts equal sum(p.numel()) of the real transformers models, exactly."""

import pytest

# Measured against real torch models: without torch (the `ml` extra) these are skipped.
torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from portal.sizing.estimator import get_preset, list_presets  # noqa: E402
from portal.sizing.estimator.presets import preset_config  # noqa: E402

from .measure import hf_config, spec_of  # noqa: E402

pytestmark = pytest.mark.torch


def _meta_model(cfg_dict):
    cfg_dict = dict(cfg_dict)
    model_type = cfg_dict.pop("model_type")
    cfg = transformers.AutoConfig.for_model(model_type, **cfg_dict)
    with torch.device("meta"):
        if model_type == "bert":
            return transformers.BertForMaskedLM(cfg)
        return transformers.AutoModelForCausalLM.from_config(cfg)


def _expert_numel(model) -> int:
    return sum(p.numel() for n, p in model.named_parameters() if ".experts." in n)


@pytest.mark.parametrize("name", list_presets())
def test_preset_param_count_is_exact(name):
    model = _meta_model(preset_config(name))
    spec = get_preset(name)
    real_total = sum(p.numel() for p in model.parameters())
    assert spec.params.total == real_total
    assert spec.params.trainable == real_total
    if spec.is_moe:
        experts = _expert_numel(model)
        assert experts > 0
        active = real_total - experts + experts * spec.experts_per_token // spec.num_experts
        assert spec.params.active == active
        assert spec.params.active < spec.params.total
    else:
        assert spec.params.active == real_total


@pytest.mark.parametrize(
    "family, shape",
    [
        ("llama", {"hidden": 96, "heads": 6, "kv_heads": 2, "inter": 200, "layers": 3}),
        ("llama", {"hidden": 64, "heads": 4, "kv_heads": 4, "inter": 176, "layers": 2}),
        ("qwen2", {"hidden": 128, "heads": 8, "kv_heads": 2, "inter": 300, "tie": False}),
        ("qwen2", {"hidden": 64, "heads": 4, "kv_heads": 1, "inter": 100, "tie": True}),
        ("qwen3", {"hidden": 96, "heads": 6, "kv_heads": 2, "inter": 200, "head_dim": 32}),
        ("qwen3", {"hidden": 64, "heads": 4, "kv_heads": 1, "inter": 100, "tie": True}),
        ("phi3", {"hidden": 96, "heads": 6, "kv_heads": 2, "inter": 200}),
        ("gemma", {"hidden": 96, "heads": 3, "kv_heads": 1, "inter": 200, "head_dim": 64}),
        ("gemma2", {"hidden": 96, "heads": 3, "kv_heads": 1, "inter": 200, "head_dim": 64, "layers": 4}),
        ("gemma3_text", {"hidden": 96, "heads": 3, "kv_heads": 1, "inter": 200, "head_dim": 64, "layers": 4}),
        ("mixtral", {"hidden": 64, "heads": 4, "kv_heads": 2, "inter": 80, "layers": 2}),
        ("qwen3_moe", {"hidden": 64, "heads": 4, "kv_heads": 2, "inter": 48, "layers": 2, "experts": 6}),
        ("gpt2", {"hidden": 96, "heads": 3, "layers": 3}),
        ("bert", {"hidden": 64, "heads": 4, "layers": 2, "inter": 200}),
    ],
)
def test_small_model_param_count_is_exact(family, shape):
    cfg, cls = hf_config(family, "eager" if family == "gemma2" else "sdpa", **shape)  # Gemma 2: no SDPA
    with torch.device("meta"):
        model = cls(cfg)
    spec = spec_of(cfg)
    assert spec.params.total == sum(p.numel() for p in model.parameters())
    if family in ("mixtral", "qwen3_moe"):
        experts = _expert_numel(model)
        routed = experts * spec.experts_per_token // spec.num_experts
        assert spec.params.active == spec.params.total - experts + routed
