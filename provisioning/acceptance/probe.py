"""The memory probe of the plan's own layout: the same model shape, micro-batch, sequence length
and activation checkpointing at reduced depth, on one GPU without sharding (what one process of
``node_checks.py`` can run), with the estimator's figure for exactly that layout."""

from __future__ import annotations

import dataclasses
import json

from portal.sizing.estimator import ParallelConfig, TrainingConfig, estimate_memory
from portal.sizing.estimator import memory as memory_terms
from portal.sizing.recommend.plan import Plan

PROBE_LAYERS = 2


def memory_probe(plan_data: dict | None) -> tuple[str, str]:
    """(probe JSON for node_checks.py, "") or ("", why there is no probe)."""
    if not plan_data:
        return "", "the order carries no sizing plan"
    try:
        plan = Plan.from_dict(plan_data)
    except ValueError as exc:
        return "", f"the order's plan cannot be re-estimated ({exc})"
    spec = plan.model_spec
    if spec.family != "llama" or spec.num_experts:
        return "", f"the probe model is Llama-style; {spec.name} is {spec.family}"
    if plan.finetune not in ("", "full"):
        return "", f"the probe trains every weight; the plan fine-tunes with {plan.finetune}"
    layers = min(PROBE_LAYERS, spec.num_layers)
    # node_checks.py runs train_smoke.py's Llama (no biases, its own head) with that shape
    reduced = dataclasses.replace(spec, num_layers=layers, implementation="trainyard-smoke",
                                  tie_word_embeddings=False, qkv_bias=False, o_bias=False, mlp_bias=False)
    training = TrainingConfig(precision="bf16-mixed", mixed_layout="autocast", optimizer="adamw",
                              micro_batch=plan.micro_batch, seq_len=plan.seq_len,
                              checkpointing="full" if plan.checkpointing == "full" else "none",
                              attention="sdpa")
    try:
        estimate = estimate_memory(reduced, training, ParallelConfig())
    except ValueError as exc:
        return "", f"the estimator refuses the reduced layout: {exc}"
    probe = {"vocab": spec.vocab_size, "hidden": spec.hidden_size, "layers": layers,
             "heads": spec.num_heads, "kv_heads": spec.num_kv_heads or spec.num_heads,
             "ffn": spec.intermediate_size, "seq": plan.seq_len, "micro_batch": plan.micro_batch,
             "checkpointing": training.checkpointing, "estimate_bytes": allocator_bytes(estimate.per_gpu),
             "estimate_total_bytes": estimate.per_gpu.total}
    return json.dumps(probe, separators=(",", ":")), ""


def allocator_bytes(per_gpu) -> int:
    """The part of the estimate PyTorch's caching allocator holds (``max_memory_allocated``):
    the total less what lives outside it (CUDA context, NCCL buffers), as bench/gpu_peak.py
    compares it."""
    return int(per_gpu.total - (per_gpu.framework_overhead - memory_terms.CUBLAS_WORKSPACE_BYTES))
