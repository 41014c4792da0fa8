"""Sane ranges for the figures of a stored sizing plan, checked where a plan enters (plan_check).

A plan is customer input (the API takes one with a quote), and pages compute with its figures:
``10**400`` bytes overflows a float, a ``1e308`` TB NVMe prints nonsense, and a negative
headroom says the plan does not fit, which no recommended plan says. The ranges are generous
(ten times the largest server a plan could describe) but finite.
"""

from __future__ import annotations

import json
import math

from portal.sizing.estimator.config import LIMITS
from portal.sizing.recommend.types import MAX_TOKENS

MAX_PLAN_BYTES = 64 * 1024  # a whole recommended plan is about 3 KB as JSON
MAX_DEPTH = 6  # plan → model_spec / stack_settings / workload → values
MAX_MAGNITUDE = MAX_TOKENS  # no number anywhere in a plan is larger than the most tokens trained
PB = 10**15

# The settings a sizing request may give are bounded as the request is (estimator.config.LIMITS).
FIGURE_RANGES: dict[str, tuple[float, float]] = {
    **{key: LIMITS[key] for key in ("gpus_per_node", "tp", "pp", "dp", "ep", "micro_batch",
                                    "grad_accum", "seq_len")},
    "nodes": (1, 1024), "gpus": (1, 65536), "lora_rank": (0, LIMITS["lora_rank"][1]),
    "global_batch_tokens": (0, LIMITS["global_batch_tokens"][1]), "train_tokens": (0, MAX_TOKENS),
    "per_gpu_total_bytes": (0, PB), "gpu_memory_bytes": (0, PB), "usable_memory_bytes": (0, PB),
    "headroom_bytes": (0, PB), "cpu_bytes_per_node": (0, PB), "checkpoint_bytes": (0, 100 * PB),
    "checkpoints_kept": (0, 10_000),
    "tokens_per_second": (0, 10**12), "step_seconds": (0, 10**9), "comm_seconds": (0, 10**9),
    "train_hours": (0, 10**7), "price_hourly_usd": (0, 10**9), "price_total_usd": (0, 10**13),
    "mfu": (0, 1), "nvme_tb": (0, 10_000), "storage_tb": (0, 100_000),
}
BREAKDOWN_RANGE = (0, PB)


def plan_bound_problems(plan: dict) -> list[str]:
    """What is out of range in ``plan`` (already plain JSON data), in words; [] when nothing is."""
    size = len(json.dumps(plan))
    if size > MAX_PLAN_BYTES:
        return [f"the plan is {size:,} bytes of JSON; at most {MAX_PLAN_BYTES:,} are accepted"]
    if _depth(plan) > MAX_DEPTH:
        return [f"the plan nests deeper than {MAX_DEPTH} levels"]
    problems = [f"{key} must be between {low:,} and {high:,}"
                for key, (low, high) in FIGURE_RANGES.items() if _out_of(plan.get(key), low, high)]
    breakdown = plan.get("memory_breakdown_bytes")
    if isinstance(breakdown, dict) and any(_out_of(v, *BREAKDOWN_RANGE) for v in breakdown.values()):
        problems.append(f"each memory_breakdown_bytes term must be between 0 and {BREAKDOWN_RANGE[1]:,}")
    if not problems and _largest(plan) > MAX_MAGNITUDE:
        problems.append(f"no figure may be larger than {MAX_MAGNITUDE:.0e}")
    return problems


def _out_of(value, low, high) -> bool:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return False  # absent, or of the wrong type: figure_problems / Plan.from_dict say so
    if isinstance(value, float) and not math.isfinite(value):
        return True
    return not low <= value <= high  # int against int: exact even for 10**400


def _depth(value, level: int = 1) -> int:
    if isinstance(value, dict):
        return max([level, *(_depth(v, level + 1) for v in value.values())])
    if isinstance(value, list):
        return max([level, *(_depth(v, level + 1) for v in value)])
    return level - 1


def _largest(value) -> float:
    if isinstance(value, dict):
        return max((_largest(v) for v in value.values()), default=0)
    if isinstance(value, list):
        return max((_largest(v) for v in value), default=0)
    if isinstance(value, int | float) and not isinstance(value, bool):
        return abs(value)
    return 0
