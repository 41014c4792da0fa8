"""What the first GPU runs (one H200, docs/sizing.md "First GPU measurements") showed the
estimator lacked, each mechanism measured on CPU by what autograd saves for backward.

- bench/stack_gpu.py (and the node memory probe) train provisioning/acceptance/node/
  train_smoke.py's Llama, which saves more than Hugging Face's: ModelSpec.implementation
  "trainyard-smoke" (activations.smoke_* and held_logits).
- GPT-2 under SDPA keeps c_attn's whole output and the DynamicCache's copies of k and v
  (activations.gpt2_cache_copies).
- GPT-2's gelu_new under CUDA autocast runs pow, and so its polynomial, in fp32
  (activations.gelu_new_bytes).
"""

import contextlib
import dataclasses
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from portal.sizing.estimator import ModelSpec, ParallelConfig, TrainingConfig, estimate, estimate_memory  # noqa: E402
from portal.sizing.estimator import activations as act  # noqa: E402

from .measure import (  # noqa: E402
    SMOKE_MODES,
    CudaAutocastRules,
    build,
    hf_config,
    saved_for_backward,
    smoke_saved_for_backward,
    spec_of,
)

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "provisioning" / "acceptance" / "node"))
from train_smoke import Attention, ModelConfig, RMSNorm, rotary_tables  # noqa: E402

pytestmark = pytest.mark.torch

SMOKE_SHAPES = [
    ModelConfig(vocab=512, dim=256, layers=2, heads=8, kv_heads=1, ffn=688, seq=64),
    ModelConfig(vocab=300, dim=128, layers=3, heads=4, kv_heads=2, ffn=344, seq=48),
]


def smoke_spec(cfg: ModelConfig, **kw) -> ModelSpec:
    return ModelSpec(name="smoke", family="llama", vocab_size=cfg.vocab, hidden_size=cfg.dim,
                     num_layers=cfg.layers, num_heads=cfg.heads, intermediate_size=cfg.ffn,
                     num_kv_heads=cfg.kv_heads, implementation="trainyard-smoke", **kw)


def smoke_memory(cfg: ModelConfig, batch: int, mode: str, checkpointing: bool, **spec_kw):
    precision, layout, sharding = SMOKE_MODES[mode]
    training = TrainingConfig(precision=precision, mixed_layout=layout, micro_batch=batch, seq_len=cfg.seq,
                              checkpointing="full" if checkpointing else "none")
    return estimate_memory(smoke_spec(cfg, **spec_kw), training, ParallelConfig(sharding=sharding))


@pytest.mark.parametrize("mode", list(SMOKE_MODES))
@pytest.mark.parametrize("checkpointing", [False, True])
@pytest.mark.parametrize("shape, batch", [(0, 1), (0, 3), (1, 2)])
def test_the_smoke_model_saves_what_the_estimator_counts(mode, checkpointing, shape, batch):
    """train_smoke.py's Llama as bench/stack_gpu.py runs it (real FSDP2, MixedPrecisionPolicy
    bf16, a world of one), as the node memory probe runs it (autocast) and in fp32: what its
    forward saves, plus the logits its loop keeps, is our activations + logits_and_loss to
    the token ids; under autocast the saved half weights are our autocast cache."""
    cfg = SMOKE_SHAPES[shape]
    saved, held, casts = smoke_saved_for_backward(cfg, batch, mode, checkpointing)
    per_gpu = smoke_memory(cfg, batch, mode, checkpointing).per_gpu
    assert per_gpu.activations + per_gpu.logits_and_loss == pytest.approx(saved + held, rel=0.002)
    if mode == "autocast" and not checkpointing:
        assert casts == per_gpu.gathered_buffers


def test_the_smoke_rmsnorm_saves_two_fp32_copies_of_a_half_input():
    """``x.float() * rsqrt(x.float().pow(2).mean(...))``: each x.float() of a bf16 x is a new
    fp32 tensor (pow saves one, the multiply the other; the normalised tensor is saved in bf16);
    of an fp32 x it is x itself (next to the fp32 normalised tensor, as in HF's RMSNorm)."""
    def fp32_storages(x):
        found = set()

        def pack(t):
            if t.dtype == torch.float32 and t.shape == x.shape:
                found.add(t.untyped_storage().data_ptr())
            return t

        with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
            RMSNorm(x.shape[-1])(x)
        return found

    half = torch.randn(2, 8, 32, dtype=torch.bfloat16, requires_grad=True)
    assert len(fp32_storages(half)) == 2
    full = torch.randn(2, 8, 32, requires_grad=True)
    found = fp32_storages(full)
    assert len(found) == 2 and full.untyped_storage().data_ptr() in found
    assert act.smoke_norm_upcast(smoke_spec(SMOKE_SHAPES[0]), act.DT_HALF, 10) == 4 * 10 * 256
    assert act.smoke_norm_upcast(smoke_spec(SMOKE_SHAPES[0]), act.DT_AUTOCAST, 10) == 0
    assert act.smoke_norm_upcast(dataclasses.replace(smoke_spec(SMOKE_SHAPES[0]), implementation="hf"),
                                 act.DT_HALF, 10) == 0


def test_the_smoke_attention_saves_k_v_for_every_head_and_copies_the_merged_output():
    """k and v go into SDPA repeated to every head, so SDPA saves them whole; the rotary
    output is heads-major, SDPA's output follows q's layout, and the head merge for wo is a
    copy saved next to the output."""
    cfg = SMOKE_SHAPES[0]
    b, s = 2, cfg.seq
    attention = Attention(cfg).to(torch.bfloat16)
    saved = []
    cos, sin = rotary_tables(cfg.dim // cfg.heads, s)
    with torch.autograd.graph.saved_tensors_hooks(lambda t: saved.append(t) or t, lambda t: t):
        attention(torch.randn(b, s, cfg.dim, dtype=torch.bfloat16, requires_grad=True), cos, sin)
    per_head = [t for t in saved if t.dim() == 4]
    assert len(per_head) == 4  # q, k, v, output
    assert {tuple(t.shape) for t in per_head} == {(b, cfg.heads, s, cfg.dim // cfg.heads)}
    merged = [t for t in saved if tuple(t.shape) == (b * s, cfg.dim)][-1]  # wo's input
    assert merged.untyped_storage().data_ptr() not in {t.untyped_storage().data_ptr() for t in per_head}
    T = b * s
    spec = smoke_spec(cfg)
    assert act.smoke_repeated_kv(spec, act.DT_HALF, T) == 2 * 2 * T * (spec.q_dim - spec.kv_dim)
    assert act.smoke_head_merge_copy(spec, act.DT_HALF, T) == 2 * T * spec.q_dim


def test_the_smoke_loop_keeps_its_logits_through_the_optimizer_step():
    """``logits = model(...)`` stays referenced until the step returns: at the loss backward
    and at the step, where (one GPU, full checkpointing) the gradients make the peak."""
    cfg = ModelConfig(vocab=32000, dim=2048, layers=22, heads=32, kv_heads=4, ffn=5632, seq=256)
    smoke = smoke_memory(cfg, 1, "fsdp2", True).per_gpu
    hf = estimate_memory(dataclasses.replace(smoke_spec(cfg), implementation="hf"),
                         TrainingConfig(precision="bf16-mixed", mixed_layout="fsdp2", micro_batch=1,
                                        seq_len=cfg.seq, checkpointing="full"),
                         ParallelConfig(sharding="fsdp-full-shard")).per_gpu
    held = 2 * cfg.seq * cfg.vocab
    assert hf.gradients > hf.activations + hf.logits_and_loss + hf.transient  # the step is the peak
    assert smoke.logits_and_loss - hf.logits_and_loss == held
    allocated = smoke.total - smoke.framework_overhead - (hf.total - hf.framework_overhead)
    assert allocated == pytest.approx(held, abs=8)


def test_the_smoke_model_runs_only_what_train_smoke_runs():
    cfg = SMOKE_SHAPES[0]
    with pytest.raises(ValueError, match="dense Llama"):
        ModelSpec(name="x", family="gpt2", vocab_size=10, hidden_size=8, num_layers=1, num_heads=2,
                  intermediate_size=8, implementation="trainyard-smoke")
    with pytest.raises(ValueError, match="does not run.*eager"):
        estimate(smoke_spec(cfg), TrainingConfig(attention="eager"))
    with pytest.raises(ValueError, match="tensor, pipeline"):
        estimate(smoke_spec(cfg), TrainingConfig(), ParallelConfig(dp=1, tp=2))
    with pytest.raises(ValueError, match="unknown"):
        dataclasses.replace(smoke_spec(cfg), implementation="x")
    assert "model code=trainyard-smoke" in estimate_memory(smoke_spec(cfg)).represents


@pytest.mark.parametrize("mode, precision, dtype, autocast", [
    ("fp32", "fp32", "float32", False), ("bf16-model", "bf16", "bfloat16", False),
    ("autocast", "bf16-mixed", "float32", True)])
@pytest.mark.parametrize("batch, seq", [(2, 48), (3, 32)])
def test_gpt2_under_sdpa_keeps_c_attn_output_and_the_caches_copies_of_k_and_v(
        mode, precision, dtype, autocast, batch, seq):
    """GPT2Model makes a DynamicCache in training (config.use_cache is true): k and v reach
    SDPA as torch.cat copies, and q, a view of c_attn's output, keeps all of it alive. Without
    the cache, 2 x b x s x h activation elements fewer per layer. (A bf16 model's LayerNorm
    statistics are bf16 on CPU, fp32 on CUDA as counted: 4 B per token and norm.)"""
    measured = {}
    for use_cache in (True, False):
        cfg, cls = hf_config("gpt2", "sdpa", hidden=128, heads=4, layers=2)
        cfg.use_cache = use_cache
        measured[use_cache], _ = saved_for_backward(build(cfg, cls, getattr(torch, dtype)), batch, seq,
                                                    autocast=autocast)
    elem = 4 if mode == "fp32" else 2
    assert measured[True] - measured[False] == 2 * elem * batch * seq * 128 * 2
    est = estimate(spec_of(cfg), TrainingConfig(precision=precision, micro_batch=batch, seq_len=seq,
                                                attention="sdpa"))
    assert est.per_gpu.activations + est.per_gpu.logits_and_loss == pytest.approx(measured[True], rel=0.002)


@pytest.mark.parametrize("dtype, autocast, rules, per_elem", [
    ("float32", False, False, 20), ("bfloat16", False, False, 10),
    ("bfloat16", True, False, 10),  # CPU autocast: pow stays bf16
    ("bfloat16", True, True, 16),  # CUDA autocast: pow in fp32, and so tanh, 1 + tanh
])
def test_gelu_new_keeps_its_polynomial_in_fp32_under_cuda_autocast(dtype, autocast, rules, per_elem):
    """gelu_new = 0.5 x (1 + tanh(c (x + 0.044715 pow(x, 3)))) then c_proj: saved are pow's input,
    tanh's output, 1 + tanh, 0.5 x and c_proj's input. CUDA autocast casts pow's input to fp32
    and type promotion keeps the branch in fp32: 4 + 4 + 4 + 2 + 2 bytes per element."""
    from transformers.activations import NewGELUActivation

    n = 6 * 40
    x = torch.randn(6, 40, dtype=getattr(torch, dtype), requires_grad=True)  # c_fc's output
    proj = torch.nn.Linear(40, 8).to(torch.float32 if autocast else x.dtype)  # c_proj: the model's dtype
    sizes = {}

    def pack(t):
        if t.numel() == n:
            sizes[t.untyped_storage().data_ptr()] = t.untyped_storage().nbytes()
        return t

    mode = CudaAutocastRules() if rules else contextlib.nullcontext()
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t), mode:
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
            proj(NewGELUActivation()(x))
    assert sum(sizes.values()) == per_elem * n
    dt = {("float32", False): act.DT_FP32, ("bfloat16", False): act.DT_HALF}.get((dtype, autocast))
    if rules or dt is not None:
        assert act.gelu_new_bytes(act.DT_AUTOCAST if rules else dt) == per_elem
