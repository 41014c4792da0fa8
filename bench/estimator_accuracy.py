"""Estimator accuracy against CPU measurement of real (small) transformers models.

For each row: one real model built from its config (random init), one forward+backward and
one optimizer step on CPU. Measured = weights + gradients + optimizer state after the step
(tensor storages) + bytes saved for backward by one forward with the loss (storages
deduplicated, parameters excluded; under autocast the half weight copies are included).
Compared with our estimate of the same quantity and with public anchors:

- accelerate: HF Accelerate `estimate-memory` rule, 4 x model size for Adam training
  (16 B/param fp32, 8 B/param half); model states only.
- deepspeed: DeepSpeed's ZeRO-2 model-state estimator (estimate_zero2_model_states_mem_needs,
  2P + 18P/N bytes per GPU, here N=1); model states only.
- zero+korthikanti: ZeRO's 16 B/param + Korthikanti's s*b*h*(34 + 5*a*s/h) half-precision
  bytes per layer (x2 for fp32 activations).

Run from the repository root: python bench/estimator_accuracy.py  (needs torch, transformers)
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

GIB = 2**30


# -- public anchors, reimplemented ------------------------------------------------------------
def accelerate_training_bytes(params: int, half: bool) -> float:
    return params * (8 if half else 16)


def deepspeed_zero2_gpu_bytes(params: int, gpus: int = 1, cpu_offload: bool = False) -> float:
    """deepspeed.runtime.zero.stage_1_and_2.estimate_zero2_model_states_mem_needs (current)."""
    if cpu_offload:
        return 2 * params
    return 2 * params + int(18 * params / gpus)


def deepspeed_zero2_gpu_bytes_2023(params: int, gpus: int = 1) -> float:
    """The same function before DeepSpeed PR #5099 (4P + 16P/N), as in its docs."""
    return 4 * params + int(16 * params / gpus)


def deepspeed_zero2_cpu_bytes(params: int, gpus_per_node: int, nodes: int = 1,
                              cpu_offload: bool = True, buffer_factor: float = 1.5) -> float:
    if cpu_offload:
        return params * max(4 * gpus_per_node * nodes, 16) * buffer_factor
    return params * 4 * gpus_per_node * buffer_factor


def deepspeed_zero3_bytes(params: int, largest_layer: int, gpus_per_node: int, nodes: int = 1,
                          offload_optimizer: bool = False, offload_params: bool = False,
                          zero_init: bool = True, buffer_factor: float = 1.5
                          ) -> tuple[float, float]:
    """deepspeed.runtime.zero.stage3.estimate_zero3_model_states_mem_needs: (gpu, cpu)."""
    total_gpus, gpus_factor = gpus_per_node * nodes, 1 / nodes
    largest = 4 * largest_layer
    if offload_optimizer:
        if offload_params:
            gpu = largest
            cpu = params * (18 * gpus_factor if zero_init
                            else max(4 * gpus_per_node, 18 * gpus_factor)) * buffer_factor
        else:
            gpu = largest + int(2 * params / total_gpus)
            cpu = params * (16 * gpus_factor if zero_init
                            else max(4 * gpus_per_node, 16 * gpus_factor)) * buffer_factor
    else:
        gpu = largest + int(18 * params / total_gpus)
        cpu = (largest_layer * 4 * gpus_per_node if zero_init
               else params * 4 * gpus_per_node) * buffer_factor
    return gpu, cpu


def korthikanti_layer_bytes(s: int, b: int, h: int, a: int) -> float:
    return s * b * h * (34 + 5 * a * s / h)


# -- the grid ---------------------------------------------------------------------------------
GRID = [  # family, attention, mode, checkpointing, shape, micro-batch, seq
    ("llama", "eager", "fp32", "none", {"hidden": 192, "heads": 6, "kv_heads": 2, "layers": 3,
                                        "inter": 512}, 2, 64),
    ("llama", "sdpa", "bf16-model", "none", {"hidden": 192, "heads": 6, "kv_heads": 2,
                                             "layers": 3, "inter": 512}, 2, 64),
    ("llama", "sdpa", "autocast", "none", {"hidden": 160, "heads": 5, "kv_heads": 1,
                                           "layers": 4, "inter": 448}, 3, 40),
    ("llama", "sdpa", "bf16-model", "full", {"hidden": 192, "heads": 6, "kv_heads": 2,
                                             "layers": 4, "inter": 512}, 2, 128),
    ("qwen2", "eager", "autocast", "none", {"hidden": 128, "heads": 4, "kv_heads": 2,
                                            "layers": 3, "inter": 384}, 2, 80),
    ("qwen3", "sdpa", "autocast", "none", {"hidden": 128, "heads": 4, "kv_heads": 2,
                                           "layers": 3, "inter": 384}, 2, 80),
    ("phi3", "sdpa", "autocast", "none", {"hidden": 128, "heads": 4, "kv_heads": 2,
                                          "layers": 3, "inter": 384}, 2, 80),
    ("mixtral", "sdpa", "bf16-model", "none", {"hidden": 128, "heads": 4, "kv_heads": 2,
                                               "layers": 2, "inter": 128}, 2, 64),
    ("gpt2", "eager", "fp32", "none", {"hidden": 192, "heads": 6, "layers": 3}, 2, 96),
    ("gpt2", "eager", "bf16-model", "full", {"hidden": 256, "heads": 8, "layers": 3}, 4, 64),
    ("bert", "eager", "fp32", "none", {"hidden": 192, "heads": 6, "layers": 3}, 2, 96),
    ("bert", "sdpa", "bf16-model", "full", {"hidden": 128, "heads": 4, "layers": 4}, 2, 128),
]
MODES = {"fp32": ("fp32", "float32", False), "bf16-model": ("bf16", "bfloat16", False),
         "autocast": ("bf16-mixed", "float32", True)}


def run_row(family, attn, mode, ckpt, shape, batch, seq):
    import torch

    from portal.sizing.estimator import TrainingConfig, estimate
    from tests.sizing.measure import (
        build,
        hf_config,
        model_states_after_step,
        saved_for_backward,
        spec_of,
    )

    precision, dtype, autocast = MODES[mode]
    cfg, cls = hf_config(family, attn, **shape)
    model = build(cfg, cls, getattr(torch, dtype))
    if ckpt == "full":
        model.activation_checkpointing_enable()
    saved, casts = saved_for_backward(model, batch, seq, autocast=autocast)
    states = model_states_after_step(build(cfg, cls, getattr(torch, dtype)))
    measured = sum(states.values()) + saved + casts
    spec = spec_of(cfg)
    est = estimate(spec, TrainingConfig(precision=precision, micro_batch=batch, seq_len=seq,
                                        attention=attn, checkpointing=ckpt))
    g = est.per_gpu
    ours = g.weights + g.gradients + g.optimizer_states + g.activations + g.logits_and_loss
    if autocast and ckpt == "none":
        ours += g.gathered_buffers  # autocast weight cache: the saved half weight copies
    elif autocast:
        ours += casts  # only the head's copy is saved under full recompute
    p = spec.params.total
    half = precision != "fp32"
    act_bytes = 2 if half else 4
    korth = spec.num_layers * korthikanti_layer_bytes(seq, batch, spec.hidden_size,
                                                      spec.num_heads) * act_bytes / 2
    anchors = {
        "accelerate": accelerate_training_bytes(p, half),
        "deepspeed": deepspeed_zero2_gpu_bytes(p),
        "zero+korthikanti": 16 * p + korth,
    }
    return measured, ours, anchors


def main() -> int:
    header = (f"{'model':8} {'attn':5} {'mode':10} {'ckpt':4} {'b x s':>7} {'measured MiB':>12}"
              f" {'ours':>8} {'err':>7} {'accel.':>7} {'DS':>7} {'ZeRO+K':>7}  best")
    print(header)
    print("-" * len(header))
    worst, all_best = 0.0, True
    for row in GRID:
        family, attn, mode, ckpt, shape, batch, seq = row
        measured, ours, anchors = run_row(*row)
        err = ours / measured - 1
        errs = {k: v / measured - 1 for k, v in anchors.items()}
        best = abs(err) < min(abs(e) for e in errs.values())
        all_best &= best
        worst = max(worst, abs(err))
        print(f"{family:8} {attn:5} {mode:10} {ckpt:4} {f'{batch}x{seq}':>7}"
              f" {measured / 2**20:12.3f} {ours / 2**20:8.3f} {err:+7.2%}"
              f" {errs['accelerate']:+7.1%} {errs['deepspeed']:+7.1%}"
              f" {errs['zero+korthikanti']:+7.1%}  {'ours' if best else 'NOT OURS'}")
    print(f"\nworst |error| of ours: {worst:.2%}; ours best in every row: {all_best}")
    return 0 if all_best else 1


if __name__ == "__main__":
    raise SystemExit(main())
