"""The recommender's memory safety margin comes from the estimator's measured error
(bench/estimator_published.py): it covers the worst under-estimate among the published GPU
runs made in a regime the stacks run, plus runtime spikes, and is never below 10 %."""

import importlib.util
import sys
from pathlib import Path

import pytest

from portal.sizing.recommend import search
from tests.conftest import IN_CI

BENCH = Path(__file__).resolve().parents[2] / "bench" / "estimator_published.py"
_spec = importlib.util.spec_from_file_location("estimator_published", BENCH)
published = importlib.util.module_from_spec(_spec)
sys.modules["estimator_published"] = published  # its dataclasses look their module up
_spec.loader.exec_module(published)
if not published.CASES_PATH.exists():
    if IN_CI:
        raise RuntimeError(f"CI=true but {published.CASES_PATH} is missing")
    pytest.skip(f"{published.CASES_PATH} is not checked out", allow_module_level=True)

# torchtitan's own runs (the torchtitan stack's regime: FSDP2 mixed precision, op-level SAC or
# full AC, float8, TP/PP/CP), Hugging Face + PEFT runs (the regime of the ddp/fsdp stacks' training
# scripts) and Hugging Face + PEFT on DeepSpeed ZeRO-3 through Accelerate (the deepspeed stack's);
# not PEFT's FSDP1 runs (use_orig_params=False: no stack renders FSDP1) nor torchtune's recipes.
STACK_REGIME_CASES = ("torchtitan_llama3.1_8B_fsdp_8gpu", "peft_metamathqa_llama3.2_3B",
                      "torchtitan_llama3_h100_202412_multid", "torchtitan_llama3_8b_h200_202506_trainy",
                      "peft_docs_llama2_70b_fsdp_deepspeed")


def in_a_stack_regime(row) -> bool:
    if row.case == "peft_docs_llama2_70b_fsdp_deepspeed":
        return row.parallel.get("sharding") == "zero3"
    return row.case in STACK_REGIME_CASES


def test_the_margin_covers_the_worst_measured_under_estimate_in_the_stacks_regimes():
    results = [published.evaluate(row) for row in published.rows()
               if in_a_stack_regime(row) and row.memory_gib is not None and not row.unmodelled]
    errors = [r["memory"][2] for r in results if "memory" in r]
    assert {r["split"] for r in results} == {"calibration", "held-out"}  # both splits count
    assert len(errors) >= 6
    worst_under = max(-e for e in errors)
    assert worst_under > 0  # the estimator does under-count some runs: the margin is not idle
    assert search.ESTIMATOR_UNDERCOUNT_FRACTION == pytest.approx(worst_under, abs=0.0015)
    assert search.MEMORY_RESERVE_FRACTION == pytest.approx(
        max(0.10, search.ESTIMATOR_UNDERCOUNT_FRACTION + search.RUNTIME_SPIKE_FRACTION))
    assert search.MEMORY_RESERVE_FRACTION >= 0.10
