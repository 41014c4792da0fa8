"""The acceptance report says one thing (issue 29, item 7): the headline loss is the loss the
"loss falls" check compares; no bandwidth figure where nothing was measured (the simulated
node's NCCL check is skipped); "no bucket ordered" only when the order has no bucket."""

import json
import re

import pytest

from provisioning.acceptance.markers import JOB_MARKER
from provisioning.acceptance.report import AcceptanceCheck, AcceptanceReport, job_fields
from provisioning.acceptance.scripts import job_script
from provisioning.acceptance.simulated import simulated_lines


def _report(*, bucket: bool, nnodes: int = 2) -> AcceptanceReport:
    lines = simulated_lines(job_script(prefix="p", bucket=bucket), hostname="gpu-1", gpus=8,
                            nnodes=nnodes)
    job = json.loads(next(x for x in lines if x.startswith(JOB_MARKER))[len(JOB_MARKER):])
    checks = tuple(AcceptanceCheck.from_node(c) for c in job["checks"])
    return AcceptanceReport(passed=True, checks=checks, **job_fields(job))


def _numbers(text: str) -> tuple[str, str]:
    first, last = re.search(r"loss (\d+\.\d+) → (\d+\.\d+)", text).groups()
    return first, last


def test_the_headline_loss_is_the_fsdp2_checks_loss():
    report = _report(bucket=False)
    line = report.sparkline
    check = next(c for c in report.checks if c.name == "FSDP2 loss falls")
    assert (f"{line.first:.3f}", f"{line.last:.3f}") == _numbers(check.detail)
    assert line.curve == "FSDP2"


def test_a_simulated_job_claims_no_bandwidth():
    assert _report(bucket=False, nnodes=2).allreduce_busbw_gbps is None


@pytest.mark.parametrize("bucket", [True, False])
def test_the_checkpoint_goes_through_the_bucket_only_when_one_was_ordered(bucket):
    report = _report(bucket=bucket)
    assert report.checkpoint.bucket is bucket
    detail = next(c.detail for c in report.checks if c.name == "sharded checkpoint round trip")
    assert ("bucket" in detail) is bucket
