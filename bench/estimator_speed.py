"""How long one estimate() takes (p50/p95 microseconds), and its two halves. The recommender
calls the estimator thousands of times per request. Run from the repository root:

    python bench/estimator_speed.py

warm: per-model constants cached (a running server); cold: every cache cleared before each
call (clear_caches(); the first estimate of a model); memory: estimate_memory() alone (warm);
+gpu: estimate_from_memory() on an existing MemoryEstimate (what the recommender pays per
GPU and link once a layout's memory is known).
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from portal.sizing.estimator import (  # noqa: E402
    GPUSpec,
    Interconnect,
    ParallelConfig,
    TrainingConfig,
    clear_caches,
    estimate,
    estimate_from_memory,
    estimate_memory,
    get_preset,
)

H100 = GPUSpec("H100 SXM", 80 * 10**9, 989.4, 1979, 67, 3350)
CASES = {
    "llama-3.1-8b fsdp dp8": ("llama-3.1-8b", TrainingConfig(seq_len=8192),
                              ParallelConfig(dp=8, sharding="fsdp-full-shard")),
    "llama-3.1-70b tp8 pp4 sp": ("llama-3.1-70b", TrainingConfig(seq_len=8192, grad_accum=16,
                                                                 checkpointing="selective"),
                                 ParallelConfig(dp=4, tp=8, pp=4, sp=True)),
    "mixtral-8x7b zero3 ep8": ("mixtral-8x7b", TrainingConfig(seq_len=4096),
                               ParallelConfig(dp=16, sharding="zero3", ep=8)),
    "llama-2-7b qlora": ("llama-2-7b", TrainingConfig(finetune="qlora", seq_len=4096), None),
    "gpt2-124m fp32 eager": ("gpt2-124m", TrainingConfig(precision="fp32", attention="eager",
                                                         seq_len=1024), None),
}


def timed(fn, n: int, before=None) -> list[float]:
    out = []
    for _ in range(n):
        if before:
            before()
        t0 = time.perf_counter()
        fn()
        out.append((time.perf_counter() - t0) * 1e6)
    return out


def main(n: int = 5000) -> None:
    link = Interconnect.nvlink(900, inter_node_gbit=400)
    print(f"{'case':28} {'p50 us':>8} {'p95 us':>8} {'cold p50':>9} {'memory':>8} {'+gpu':>8} {'calls':>7}")
    for label, (name, tc, pc) in CASES.items():
        model = get_preset(name)

        def whole(model=model, tc=tc, pc=pc):
            estimate(model, tc, pc, gpu=H100, interconnect=link, train_tokens=1e12)

        times = timed(whole, n)
        cold = timed(whole, n // 10, before=clear_caches)
        memory = estimate_memory(model, tc, pc)
        mem_only = timed(lambda model=model, tc=tc, pc=pc: estimate_memory(model, tc, pc), n)
        gpu_only = timed(lambda memory=memory: estimate_from_memory(memory, H100, link, 1e12), n)
        q = statistics.quantiles(times, n=20)
        print(f"{label:28} {statistics.median(times):8.1f} {q[18]:8.1f} {statistics.median(cold):9.1f}"
              f" {statistics.median(mem_only):8.1f} {statistics.median(gpu_only):8.1f} {n:7}")


if __name__ == "__main__":
    main()
