"""Peak GPU memory of real training steps vs the estimator (needs CUDA, torch, transformers).

Trains small-to-medium models built from configs (random init, no downloads) for a few steps
with several settings and compares torch.cuda.max_memory_allocated() with our estimate of
what PyTorch allocates: per_gpu.total minus the parts outside the caching allocator (CUDA
context, NCCL buffers, fragmentation). Target: within 10%. About 2 minutes on one H200.

Run from the repository root: python bench/gpu_peak.py
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402
import transformers  # noqa: E402

from portal.sizing.estimator import TrainingConfig, estimate, model_from_hf_config  # noqa: E402
from portal.sizing.estimator import memory as mem  # noqa: E402

transformers.logging.set_verbosity_error()
STEPS = 3
LLAMA_1B = dict(vocab_size=32000, hidden_size=2048, intermediate_size=5632,
                num_hidden_layers=16, num_attention_heads=16, num_key_value_heads=4,
                max_position_embeddings=4096)
CASES = [  # label, config class, config kwargs, model dtype, precision, attn, ckpt, b, s
    ("llama-1b autocast sdpa", "LlamaConfig", LLAMA_1B, "float32", "bf16-mixed", "sdpa",
     "none", 4, 2048),
    ("llama-1b autocast sdpa ckpt", "LlamaConfig", LLAMA_1B, "float32", "bf16-mixed", "sdpa",
     "full", 8, 2048),
    ("llama-1b bf16 eager", "LlamaConfig", LLAMA_1B, "bfloat16", "bf16", "eager", "none", 2,
     1024),
    ("gpt2-124m fp32 eager", "GPT2Config", dict(n_embd=768, n_layer=12, n_head=12,
                                                resid_pdrop=0.0, embd_pdrop=0.0,
                                                attn_pdrop=0.0), "float32", "fp32", "eager",
     "none", 8, 1024),
    ("gpt2-124m dropout 0.1", "GPT2Config", dict(n_embd=768, n_layer=12, n_head=12),
     "float32", "bf16-mixed", "sdpa", "none", 8, 1024),
    ("mixtral-small bf16 sdpa", "MixtralConfig", dict(vocab_size=32000, hidden_size=1024,
                                                      intermediate_size=2048,
                                                      num_hidden_layers=8,
                                                      num_attention_heads=16,
                                                      num_key_value_heads=4,
                                                      num_local_experts=8,
                                                      num_experts_per_tok=2),
     "bfloat16", "bf16", "sdpa", "none", 4, 2048),
]


def measure(cls_name, kwargs, dtype, precision, attn, ckpt, b, s):
    cfg = getattr(transformers, cls_name)(attn_implementation=attn, **kwargs)
    model_cls = {"LlamaConfig": transformers.LlamaForCausalLM,
                 "GPT2Config": transformers.GPT2LMHeadModel,
                 "MixtralConfig": transformers.MixtralForCausalLM}[cls_name]
    torch.cuda.empty_cache()
    torch.cuda.reset_peak_memory_stats()
    model = model_cls(cfg).to("cuda", getattr(torch, dtype))
    model.train()
    if ckpt == "full":
        model.gradient_checkpointing_enable()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    ids = torch.randint(0, cfg.vocab_size, (b, s), device="cuda")
    for _ in range(STEPS):
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=precision == "bf16-mixed"):
            loss = model(input_ids=ids, labels=ids).loss
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
    torch.cuda.synchronize()
    peak = torch.cuda.max_memory_allocated()
    d = cfg.to_dict()
    d["model_type"] = cfg.model_type
    spec = model_from_hf_config(d)
    est = estimate(spec, TrainingConfig(precision=precision, attention=attn, checkpointing=ckpt,
                                        micro_batch=b, seq_len=s))
    del model, opt, loss
    return peak, est


def main() -> int:
    if not torch.cuda.is_available():
        print("CUDA is not available: run this on a GPU machine.")
        return 1
    print(f"GPU: {torch.cuda.get_device_name()}, torch {torch.__version__}, "
          f"transformers {transformers.__version__}")
    print(f"{'case':30} {'b x s':>9} {'measured GiB':>12} {'ours GiB':>9} {'error':>7}"
          f" {'total GiB':>9}")
    worst = 0.0
    for label, cls_name, kwargs, dtype, precision, attn, ckpt, b, s in CASES:
        peak, est = measure(cls_name, kwargs, dtype, precision, attn, ckpt, b, s)
        g = est.per_gpu
        outside = g.framework_overhead - mem.CUBLAS_WORKSPACE_BYTES
        ours = g.total - outside
        err = ours / peak - 1
        worst = max(worst, abs(err))
        print(f"{label:30} {f'{b}x{s}':>9} {peak / 2**30:12.2f} {ours / 2**30:9.2f}"
              f" {err:+7.1%} {g.total / 2**30:9.2f}")
    print(f"worst |error|: {worst:.1%} (target 10%)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
