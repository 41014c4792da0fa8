"""Pure behaviour of the estimator API (no torch, no DB)."""

import ast
import json
from dataclasses import FrozenInstanceError, asdict
from pathlib import Path

import pytest

from portal.sizing.estimator import (
    GPUSpec,
    Interconnect,
    ParallelConfig,
    TrainingConfig,
    clear_caches,
    estimate,
    estimate_compute,
    estimate_from_memory,
    estimate_memory,
    get_preset,
    list_presets,
    model_from_hf_config,
    model_from_params,
)
from portal.sizing.estimator.presets import preset_config

H100 = GPUSpec("H100 SXM", memory_bytes=80 * 10**9, bf16_tflops=989.4, fp8_tflops=1979,
               fp32_tflops=67, memory_bandwidth_gbps=3350)
PACKAGE = Path(__file__).resolve().parents[2] / "portal/sizing/estimator"


def test_package_imports_only_the_standard_library():
    allowed_roots = {"__future__", "dataclasses", "enum", "functools", "json", "math",
                     "pathlib", "typing"}
    for path in PACKAGE.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                roots = {a.name.split(".")[0] for a in node.names}
            elif isinstance(node, ast.ImportFrom) and node.level == 0:
                roots = {node.module.split(".")[0]}
            else:
                continue
            assert roots <= allowed_roots, (path.name, roots)


# Pure modules of lower layers the recommender may read: the units, the stacks' capability names
# and the money module.
PURE_MODULES = ("portal.core.units", "portal.catalog.capabilities", "portal.catalog.pricing")


def test_recommender_imports_only_the_standard_library_the_estimator_and_the_units():
    allowed_roots = {"__future__", "bisect", "collections", "contextlib", "dataclasses", "decimal",
                     "functools", "gc", "math", "itertools", "threading", "typing", "weakref"}
    for path in (PACKAGE.parent / "recommend").glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                modules = {a.name for a in node.names}
            elif isinstance(node, ast.ImportFrom) and node.level == 0:
                modules = {node.module}
            else:
                continue
            for module in modules:
                assert module.split(".")[0] in allowed_roots or module.startswith(
                    "portal.sizing.estimator") or module in PURE_MODULES, (path.name, module)


def test_the_units_module_imports_only_the_standard_library():
    units = PACKAGE.parents[1] / "core/units.py"
    roots = set()
    for node in ast.walk(ast.parse(units.read_text())):
        if isinstance(node, ast.Import):
            roots |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            roots.add(node.module.split(".")[0])
    assert roots <= {"__future__", "decimal"}, roots


LLAMA_TINY = {"model_type": "llama", "vocab_size": 32000, "hidden_size": 2048, "num_hidden_layers": 2,
              "num_attention_heads": 16, "num_key_value_heads": 8, "intermediate_size": 5632}


@pytest.mark.parametrize(("change", "message"), [
    ({"head_dim": "x"}, "head_dim must be a whole number"),  # was a TypeError deep in memory.py
    ({"hidden_size": 2048.5}, "hidden_size must be a whole number"),
    ({"num_hidden_layers": True}, "num_layers must be a whole number"),
    ({"num_key_value_heads": -8}, "num_kv_heads must be a whole number >= 0"),  # -8 "divided" 16 heads
    ({"model_type": "mixtral", "num_local_experts": -1, "num_experts_per_tok": 2},
     "num_experts must be a whole number >= 0"),
    ({"model_type": "gpt2", "n_embd": 768, "n_layer": 2, "n_head": 12, "n_positions": "1024"},
     "max_position_embeddings must be a whole number"),
    ({"model_type": "gpt2", "n_embd": 768, "n_layer": 2, "n_head": 12, "n_positions": 1024,
      "activation_function": ["gelu"]}, "activation must be text"),  # was unhashable in the caches
    ({"attention_dropout": 1.5}, "dropout must be a probability"),
])
def test_config_values_of_the_wrong_type_raise_value_error(change, message):
    with pytest.raises(ValueError, match=message):
        estimate(model_from_hf_config(LLAMA_TINY | change))


def test_integral_floats_in_a_config_are_whole_numbers():
    as_floats = LLAMA_TINY | {"hidden_size": 2048.0, "num_hidden_layers": 2.0}
    assert model_from_hf_config(as_floats).params == model_from_hf_config(LLAMA_TINY).params


def test_presets_are_listed_and_named_in_lower_case():
    names = list_presets()
    for required in ("gpt2-124m", "gpt2-1.5b", "llama-2-7b", "llama-3.1-405b", "mixtral-8x7b",
                     "qwen2.5-72b", "bert-large", "mistral-7b"):
        assert required in names
    assert all(n == n.lower() and " " not in n for n in names)


def test_unknown_preset_lists_the_choices():
    with pytest.raises(ValueError, match="llama-3.1-8b"):
        get_preset("llama-9")


@pytest.mark.parametrize(
    "parallel, message",
    [
        (dict(tp=3), "tp=3 does not divide 32 attention heads"),
        (dict(pp=40), "pp=40 is more than"),
        (dict(ep=2, dp=2), "needs a mixture-of-experts"),
        (dict(dp=4, offload="optimizer"), "needs ZeRO or FSDP"),
        (dict(sp=True), "sequence parallel"),
    ],
)
def test_bad_parallel_settings_raise_actionable_errors(parallel, message):
    with pytest.raises(ValueError, match=message):
        estimate(get_preset("llama-2-7b"), TrainingConfig(), ParallelConfig(**parallel))


def test_bad_training_settings_raise():
    with pytest.raises(ValueError, match="optimizer='adam'"):
        TrainingConfig(optimizer="adam")
    with pytest.raises(ValueError, match="micro_batch"):
        TrainingConfig(micro_batch=0)
    with pytest.raises(ValueError, match="1024 learned positions"):
        estimate(get_preset("gpt2-124m"), TrainingConfig(seq_len=4096))
    with pytest.raises(ValueError, match="its linear layers are"):
        estimate(get_preset("gpt2-124m"), TrainingConfig(seq_len=512, finetune="lora"))
    with pytest.raises(ValueError, match="unsupported model_type"):
        model_from_hf_config({"model_type": "t5"})


def test_results_are_frozen_and_total_is_the_sum():
    est = estimate(get_preset("llama-3.1-8b"), TrainingConfig(seq_len=4096), gpu=H100)
    with pytest.raises(FrozenInstanceError):
        est.per_gpu.total = 0
    parts = est.to_dict()["per_gpu_bytes"]
    assert parts["total"] == sum(v for k, v in parts.items() if k != "total")
    json.dumps(est.to_dict())


def test_sharding_orders_model_states():
    model, tc = get_preset("llama-2-13b"), TrainingConfig(seq_len=1024)
    states = []
    for sharding in ("none", "zero1", "zero2", "zero3"):
        g = estimate(model, tc, ParallelConfig(dp=8, sharding=sharding)).per_gpu
        states.append(g.weights + g.gradients + g.optimizer_states)
    assert states == sorted(states, reverse=True) and len(set(states)) == 4


def test_offload_moves_optimizer_to_host_ram():
    model, tc = get_preset("llama-2-7b"), TrainingConfig(seq_len=1024)
    on_gpu = estimate(model, tc, ParallelConfig(dp=8, sharding="zero3"))
    off = estimate(model, tc, ParallelConfig(dp=8, sharding="zero3", offload="optimizer"))
    assert off.per_gpu.optimizer_states == 0
    assert off.cpu_bytes == pytest.approx(on_gpu.per_gpu.optimizer_states * 8, rel=1e-6)


def test_checkpointing_and_flash_reduce_activations():
    model = get_preset("llama-2-7b")
    acts = [estimate(model, TrainingConfig(seq_len=4096, attention=attn, checkpointing=c))
            .per_gpu.activations for attn, c in
            (("eager", "none"), ("eager", "selective"), ("sdpa", "none"), ("sdpa", "full"))]
    assert acts[0] > acts[1] and acts[0] > acts[2] > acts[3]
    assert acts[1] == pytest.approx(acts[2], rel=0.01)  # no s^2 terms left either way


def test_tensor_and_sequence_parallel_split_activations():
    model, tc = get_preset("llama-2-70b"), TrainingConfig(seq_len=4096)
    base = estimate(model, tc).per_gpu.activations
    tp8 = estimate(model, tc, ParallelConfig(tp=8)).per_gpu.activations
    sp8 = estimate(model, tc, ParallelConfig(tp=8, sp=True)).per_gpu.activations
    assert base > tp8 > sp8 > base / 8 * 0.9


def test_moe_active_params_and_expert_parallel():
    model = get_preset("mixtral-8x7b")
    assert model.params.active < model.params.total / 3
    tc = TrainingConfig(seq_len=4096)
    ep1 = estimate(model, tc, ParallelConfig(dp=8)).per_gpu.weights
    ep8 = estimate(model, tc, ParallelConfig(dp=8, ep=8)).per_gpu.weights
    assert ep8 < ep1 / 4


def test_lora_and_qlora_shrink_trainable_state():
    model = get_preset("llama-2-7b")
    full = estimate(model, TrainingConfig(seq_len=1024))
    lora = estimate(model, TrainingConfig(seq_len=1024, finetune="lora", lora_rank=16))
    qlora = estimate(model, TrainingConfig(seq_len=1024, finetune="qlora", lora_rank=16))
    assert lora.params.trainable == 32 * 4 * 16 * (4096 + 4096)
    assert lora.per_gpu.optimizer_states < full.per_gpu.optimizer_states / 100
    assert qlora.per_gpu.weights < lora.per_gpu.weights / 3


def test_compute_and_time_to_train():
    model = get_preset("llama-3.1-8b")
    tc = TrainingConfig(seq_len=8192, grad_accum=4)
    est = estimate(model, tc, ParallelConfig(dp=8, sharding="fsdp-full-shard"), gpu=H100,
                   interconnect=Interconnect.nvlink(900), train_tokens=1e12)
    c = est.compute
    norms = (2 * 32 + 1) * 4096  # elementwise, not matmuls
    n = model.params.total - model.vocab_size * model.hidden_size - norms  # no embedding lookup
    assert c.model_flops_per_token == pytest.approx(6 * n + 12 * 32 * 4096 * 8192, rel=1e-9)
    assert c.time_to_train_seconds == pytest.approx(1e12 / c.tokens_per_second)
    assert c.comm_bytes["dp"] > 0 and c.bubble_fraction == 0
    ckpt = estimate(model, TrainingConfig(seq_len=8192, checkpointing="full"), gpu=H100).compute
    head = 6 * model.vocab_size * model.hidden_size  # the output head is not recomputed
    assert ckpt.hardware_flops_per_token == pytest.approx(
        ckpt.model_flops_per_token + (ckpt.model_flops_per_token - head) / 3)


def test_pipeline_bubble_and_slow_links():
    model, tc = get_preset("llama-2-70b"), TrainingConfig(seq_len=4096, grad_accum=8)
    est = estimate(model, tc, ParallelConfig(tp=8, pp=4, dp=2), gpu=H100,
                   interconnect=Interconnect.nvlink(900, inter_node_gbit=400))
    assert est.compute.bubble_fraction == pytest.approx(3 / 11)
    slow = estimate(model, tc, ParallelConfig(dp=8, sharding="zero3"), gpu=H100,
                    interconnect=Interconnect.pcie(4))
    fast = estimate(model, tc, ParallelConfig(dp=8, sharding="zero3"), gpu=H100,
                    interconnect=Interconnect.nvlink(900))
    assert slow.compute.comm_seconds["dp"] > 10 * fast.compute.comm_seconds["dp"]


def test_checkpoint_full_state_about_14_bytes_per_param():
    model = get_preset("llama-3.1-70b")
    est = estimate(model, TrainingConfig(seq_len=1024), ParallelConfig(dp=8, sharding="zero3"))
    assert est.checkpoint.full_state_bytes / model.params.total == pytest.approx(14, rel=0.01)
    assert est.checkpoint.model_only_bytes == 2 * model.params.total


def test_model_from_params_keeps_the_given_count():
    model = model_from_params(7_000_000_000, layers=32, hidden=4096, heads=32, vocab=32000)
    assert model.params.total == 7_000_000_000
    est = estimate(model, TrainingConfig(precision="fp32", seq_len=128))
    assert est.per_gpu.weights == pytest.approx(4 * 7e9, rel=1e-6)


SPLIT_CASES = [
    ("llama-3.1-8b", TrainingConfig(seq_len=4096, grad_accum=4),
     ParallelConfig(dp=8, sharding="fsdp-full-shard")),
    ("llama-2-70b", TrainingConfig(seq_len=4096, grad_accum=8, checkpointing="selective"),
     ParallelConfig(dp=2, tp=8, pp=4, sp=True)),
    ("mixtral-8x7b", TrainingConfig(seq_len=2048), ParallelConfig(dp=16, sharding="zero3", ep=8)),
    ("llama-2-7b", TrainingConfig(finetune="qlora", seq_len=2048), ParallelConfig(dp=4, sharding="zero2",
                                                                                   offload="optimizer")),
    ("gpt2-124m", TrainingConfig(precision="fp32", attention="eager", seq_len=512, finetune="lora",
                                 lora_targets=("all-linear",)), None),
]
LINKS = [None, Interconnect.nvlink(900, inter_node_gbit=400),
         Interconnect.pcie(4, gpus_per_node=4, inter_node_gbit=100)]


@pytest.mark.parametrize("name, tc, pc", SPLIT_CASES)
def test_estimate_is_memory_plus_compute(name, tc, pc):
    model = get_preset(name)
    memory = estimate_memory(model, tc, pc)
    assert memory.to_dict()["per_gpu_bytes"] == asdict(memory.per_gpu)
    json.dumps(memory.to_dict())
    for link in LINKS:
        for gpu, tokens in ((None, None), (H100, None), (H100, 1e12)):
            whole = estimate(model, tc, pc, gpu=gpu, interconnect=link, train_tokens=tokens)
            split = estimate_from_memory(memory, gpu, link, tokens)
            assert split == whole and split.to_dict() == whole.to_dict()
            assert split.per_gpu == memory.per_gpu and split.checkpoint == memory.checkpoint
            assert split.cpu_bytes == memory.cpu_bytes_per_node((link or Interconnect()).gpus_per_node)
            if gpu:
                assert estimate_compute(memory, gpu, link, tokens) == whole.compute
                assert split.fits == memory.fits(gpu)


def test_one_memory_estimate_serves_every_gpu_and_mfu():
    model = get_preset("llama-3.1-8b")
    pc = ParallelConfig(dp=8, sharding="zero3")
    memory = estimate_memory(model, TrainingConfig(seq_len=4096), pc)
    a100 = GPUSpec("A100 SXM", memory_bytes=80 * 10**9, bf16_tflops=312, fp32_tflops=19.5)
    for gpu in (H100, a100):
        for mfu in (0.2, 0.45, 1.0):
            with_mfu = estimate(model, TrainingConfig(seq_len=4096, mfu=mfu), pc, gpu=gpu, train_tokens=1e9)
            assert estimate_from_memory(memory, gpu, None, 1e9, mfu=mfu) == with_mfu
            assert estimate_compute(memory, gpu, train_tokens=1e9, mfu=mfu) == with_mfu.compute
    with pytest.raises(ValueError, match="mfu must be in"):
        estimate_compute(memory, H100, mfu=1.5)
    with pytest.raises(ValueError, match="no FP8"):
        estimate_compute(estimate_memory(model, TrainingConfig(precision="fp8"), pc), a100)


def test_memory_estimate_validates_and_counts_host_ram_per_node():
    model = get_preset("llama-2-7b")
    with pytest.raises(ValueError, match="tp=3 does not divide"):
        estimate_memory(model, TrainingConfig(), ParallelConfig(tp=3))
    off = estimate_memory(model, TrainingConfig(seq_len=1024), ParallelConfig(dp=16, sharding="zero3",
                                                                             offload="optimizer"))
    assert off.per_gpu.optimizer_states == 0 and off.cpu_bytes_per_gpu > 0
    assert off.cpu_bytes_per_node(4) == int(off.cpu_bytes_per_gpu * 4)
    assert off.cpu_bytes_per_node() == int(off.cpu_bytes_per_gpu * 8)  # estimate()'s default link


def test_caches_never_change_results():
    model = get_preset("mixtral-8x7b")
    tc = TrainingConfig(seq_len=2048, finetune="lora", lora_targets=("all-linear",))
    pc = ParallelConfig(dp=8, sharding="zero3", ep=2)
    warm = estimate(model, tc, pc, gpu=H100, train_tokens=1e9)
    clear_caches()
    cold = estimate(model, tc, pc, gpu=H100, train_tokens=1e9)
    assert cold == warm and cold.to_dict() == warm.to_dict()
    # an equal ModelSpec built separately hits the same per-model constants and agrees
    other = model_from_hf_config(preset_config("mixtral-8x7b"), name="mixtral-8x7b")
    assert estimate(other, tc, pc, gpu=H100, train_tokens=1e9) == warm


def test_the_capability_names_import_only_the_standard_library():
    source = (PACKAGE.parents[1] / "catalog/capabilities.py").read_text()
    roots = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            roots |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            roots.add(node.module.split(".")[0])
    assert roots <= {"__future__", "re"}
