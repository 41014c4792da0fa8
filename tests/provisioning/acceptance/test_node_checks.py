"""node_checks.py: GPU-only checks skip with their reason on a test host and fail, with the
reason, on a GPU node that lacks the tools or whose tool hangs; nccl-tests is looked for where the
stack's bootstrap builds it first."""

import json
import os
import subprocess
import sys

from provisioning.acceptance.markers import NODE_MARKER
from provisioning.acceptance.scripts import NODE_CHECKS


def node_checks(tmp_path, env: dict, *args: str) -> tuple[int, dict]:
    base = {k: v for k, v in os.environ.items() if not k.startswith("TRAINYARD_")}
    proc = subprocess.run([sys.executable, str(NODE_CHECKS), *args],
                          env={**base, "PATH": str(tmp_path), "TRAINYARD_ROOT": str(tmp_path), **env},
                          capture_output=True, text=True, timeout=120)
    [line] = [x for x in proc.stdout.splitlines() if x.startswith(NODE_MARKER + " ")]
    return proc.returncode, json.loads(line.split(" ", 1)[1])


def test_every_check_skips_with_the_reason_on_a_test_host(tmp_path):
    status, data = node_checks(tmp_path, {"TRAINYARD_TEST_HOST": "1", "TRAINYARD_NODE": "cpu-1"},
                               "--gpus", "2", "--baseline-busbw-gbps", "22")
    assert status == 0 and data["node"] == "cpu-1"
    assert [c["status"] for c in data["checks"]] == ["skip", "skip", "skip"]
    assert all("TRAINYARD_TEST_HOST=1" in c["detail"] for c in data["checks"])


def test_a_gpu_node_without_nccl_tests_fails_and_says_why(tmp_path):
    status, data = node_checks(tmp_path, {}, "--gpus", "8", "--baseline-busbw-gbps", "315",
                               "--probe-skip-reason", "the order carries no sizing plan")
    checks = {c["name"]: c for c in data["checks"]}
    assert status == 1
    nccl = checks["NCCL all-reduce bus bandwidth"]
    assert nccl["status"] == "fail" and "all_reduce_perf is not installed" in nccl["detail"]
    expected = tmp_path / "opt/trainyard/nccl-tests/build/all_reduce_perf"
    assert f"expected at {expected} (built by the stack's bootstrap) or on PATH" in nccl["detail"]
    assert checks["DCGM diagnostics (dcgmi diag -r 1)"]["detail"] == "DCGM is not installed on this node"
    assert checks["peak memory of one step vs the estimator"] == {
        "name": "peak memory of one step vs the estimator", "status": "skip", "ok": True,
        "detail": "the order carries no sizing plan"}


def test_all_reduce_perf_is_judged_against_the_baseline(tmp_path):
    fake = tmp_path / "all_reduce_perf"  # a recorded nccl-tests summary line, as the tool prints it
    fake.write_text("#!/bin/sh\necho '# Out of bounds values : 0 OK'\n"
                    "echo '# Avg bus bandwidth    : 201.5 '\n")
    fake.chmod(0o755)
    status, data = node_checks(tmp_path, {}, "--gpus", "8", "--baseline-busbw-gbps", "315",
                               "--probe-skip-reason", "no plan")
    nccl = data["checks"][0]
    assert (status, nccl["status"], nccl["value"], nccl["threshold"]) == (1, "fail", 201.5, 252.0)
    assert nccl["detail"] == "201.5 GB/s (baseline 315 GB/s, at least 252 GB/s)"
    status, data = node_checks(tmp_path, {}, "--gpus", "8", "--baseline-busbw-gbps", "240",
                               "--probe-skip-reason", "no plan")
    assert data["checks"][0]["status"] == "pass"


def fake_all_reduce_perf(path, busbw: float):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"#!/bin/sh\necho '# Avg bus bandwidth    : {busbw} '\n")
    path.chmod(0o755)


def test_the_bootstraps_nccl_tests_build_comes_before_path(tmp_path):
    fake_all_reduce_perf(tmp_path / "all_reduce_perf", 12.0)  # on PATH
    fake_all_reduce_perf(tmp_path / "opt/trainyard/nccl-tests/build/all_reduce_perf", 301.0)
    _, data = node_checks(tmp_path, {}, "--gpus", "8", "--baseline-busbw-gbps", "315",
                          "--probe-skip-reason", "no plan")
    assert (data["checks"][0]["status"], data["checks"][0]["value"]) == ("pass", 301.0)


def test_a_tool_that_hangs_fails_its_check_with_the_reason(tmp_path):
    hung = tmp_path / "all_reduce_perf"
    hung.write_text("#!/bin/sh\necho starting\n/bin/sleep 60\n")  # its child keeps the pipe open
    hung.chmod(0o755)
    status, data = node_checks(tmp_path, {}, "--gpus", "8", "--baseline-busbw-gbps", "315",
                               "--probe-skip-reason", "no plan", "--tool-timeout-s", "1")
    nccl = data["checks"][0]
    assert (status, nccl["status"]) == (1, "fail")
    assert nccl["detail"] == "all_reduce_perf did not finish within 1 s"
