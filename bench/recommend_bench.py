"""Recommender speed over the whole seeded catalog: pruned search vs the naive exhaustive loop.

    .venv/bin/python bench/recommend_bench.py [--repeat 15] [--naive-repeat 1]

For each preset: p50/p95 wall time of recommend() (pruned) over --repeat runs as a running
server answers a workload shape it has met before (its searcher kept: recommend/memo.py; the
step times are worked out again each time), p95 of a shape met for the first time (searchers
dropped before each run; the estimator's per-model caches warm, as after other requests for the
model), p95 cold (every searcher and estimator cache dropped: the first request for a model),
the estimator calls of a first-time shape, candidates (layout x micro-batch configurations
decided) per second of it, and the same for the naive loop (same search space, every layout x
micro-batch estimated with GPU and link by estimate(), no pruning, no memo; caches cleared
first), plus whether both give the same ranked plans (same SKU and nodes, times within 1e-9),
for the kept searcher's answer and the first-time one. The machine's load average is printed
before and after: the times are wall-clock.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from portal.sizing.catalog_data import catalog_from_seed  # noqa: E402
from portal.sizing.estimator import clear_caches  # noqa: E402
from portal.sizing.recommend import Goal, Workload, recommend  # noqa: E402
from portal.sizing.recommend.memo import forget_searches  # noqa: E402

CASES = [
    ("gpt2-1.5b", "full", 1024, 10**10),
    ("mistral-7b", "full", 4096, 2 * 10**9),
    ("llama-3.1-8b", "lora", 4096, 10**9),
    ("llama-2-13b", "full", 4096, 10**10),
    ("llama-3.1-70b", "full", 4096, 2 * 10**11),
    ("llama-3.1-70b", "qlora", 4096, 10**9),
    ("mixtral-8x7b", "full", 4096, 10**10),
]


def workload(model: str, finetune: str, seq: int, tokens: int) -> Workload:
    return Workload(model=model, finetune=finetune, seq_len=seq, global_batch_tokens=seq * 512,
                    dataset_tokens=tokens, dataset_bytes=tokens * 4, dataset_files=500_000)


def pct(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, round(q * (len(values) - 1)))]


def timed(fn, repeat: int, before=None) -> tuple[list[float], object]:
    times, out = [], None
    for _ in range(repeat):
        if before:
            before()
        t0 = time.perf_counter()
        out = fn()
        times.append((time.perf_counter() - t0) * 1000)
    return times, out


def load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=15)
    parser.add_argument("--naive-repeat", type=int, default=1)
    args = parser.parse_args()
    catalog = catalog_from_seed()
    goal = Goal("cheapest")
    print(f"catalog: {len(catalog.skus)} SKUs, {len(catalog.networks)} network options; goal: cheapest;"
          f" {os.cpu_count()} CPUs; load average {load()}")
    head = (f"{'preset':<22}{'p50 ms':>8}{'p95 ms':>8}{'new p50':>9}{'new p95':>9}{'cold p95':>9}{'calls':>7}"
            f"{'cand/s':>10}{'naive ms':>10}{'n.calls':>9}{'n.cand/s':>10}{'speed-up':>9}{'same':>6}")
    print(head)
    print("-" * len(head))
    worst = worst_new = worst_cold = 0.0

    def cold_start():
        forget_searches()
        clear_caches()

    for model, ft, seq, tokens in CASES:
        w = workload(model, ft, seq, tokens)
        recommend(w, goal, catalog)  # warm imports, the preset cache and this shape's searcher
        times, kept = timed(lambda w=w: recommend(w, goal, catalog), args.repeat)
        new, rec = timed(lambda w=w: recommend(w, goal, catalog), args.repeat, before=forget_searches)
        cold, _ = timed(lambda w=w: recommend(w, goal, catalog), args.repeat, before=cold_start)
        naive_times, naive = timed(lambda w=w: recommend(w, goal, catalog, exhaustive=True),
                                   args.naive_repeat, before=clear_caches)
        same = all([(p.sku, p.nodes) for p in r.plans] == [(p.sku, p.nodes) for p in naive.plans] and all(
            abs(a.train_hours - b.train_hours) <= 1e-9 * b.train_hours
            for a, b in zip(r.plans, naive.plans, strict=False)) for r in (kept, rec))
        p50, p95, n50 = statistics.median(times), pct(times, 0.95), statistics.median(naive_times)
        new50 = statistics.median(new)
        worst, worst_new, worst_cold = max(worst, p95), max(worst_new, pct(new, 0.95)), max(worst_cold,
                                                                                         pct(cold, 0.95))
        print(f"{model + ' ' + ft:<22}{p50:>8.1f}{p95:>8.1f}{new50:>9.1f}{pct(new, 0.95):>9.1f}"
              f"{pct(cold, 0.95):>9.1f}{rec.estimator_calls:>7}"
              f"{rec.candidates_evaluated / (new50 / 1000):>10,.0f}{n50:>10.0f}{naive.estimator_calls:>9}"
              f"{naive.candidates_evaluated / (n50 / 1000):>10,.0f}{n50 / new50:>8.0f}×"
              f"{'yes' if same else 'NO':>6}")
    print(f"worst p95: {worst:.1f} ms for a shape met before, {worst_new:.1f} ms for a new shape, cold"
          f" {worst_cold:.1f} ms (target 100 ms); load average {load()}")


if __name__ == "__main__":
    main()
