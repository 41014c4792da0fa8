"""train_smoke.py run for real: torchrun, 2 gloo processes on CPU (a declared test host), DDP then
FSDP2, and the sharded checkpoint through the loopback S3 bucket with the order's issued key;
without a bucket across two "nodes" (two torchruns, two work directories); its failure paths
(a rank without CUDA, a rank out of memory, a drifted replica, a diverged loss, a hung sync)."""

import importlib.util
import json
import math
import os
import socket
import subprocess
import sys
from argparse import Namespace
from pathlib import Path

import pytest

from provisioning.acceptance.markers import JOB_MARKER
from provisioning.acceptance.scripts import REPORT_FILE, TRAIN_SMOKE
from provisioning.storage.models import Credential
from provisioning.storage.node import SYNC_TOOL
from provisioning.storage.services import storage_setup
from tests.provisioning.storage.conftest import make_storage_order

pytestmark = pytest.mark.torch
TORCHRUN = os.path.join(os.path.dirname(sys.executable), "torchrun")
HARNESS = Path(__file__).with_name("smoke_harness.py")


def _env(env: dict) -> dict:
    base = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "DJANGO", "TRAINYARD_"))}
    return {**base, "OMP_NUM_THREADS": "1", **env}


def torchrun(tmp_path, env: dict, *args: str, nproc: int = 2) -> tuple[int, dict | None, str]:
    work = tmp_path / "work"
    proc = subprocess.run(
        [TORCHRUN, "--standalone", "--nproc-per-node", str(nproc), str(TRAIN_SMOKE),
         "--workdir", str(work), "--sync-tool", str(SYNC_TOOL), *args],
        env=_env(env), capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert JOB_MARKER not in proc.stdout  # the report goes to a file; the node script prints it
    report = json.loads((work / REPORT_FILE).read_text()) if (work / REPORT_FILE).exists() else None
    return proc.returncode, report, proc.stdout + proc.stderr


@pytest.fixture
def bucket(db, storage_provider, embedded_s3, tmp_path):
    order = make_storage_order(storage_provider=storage_provider, storage_tb=1)
    result = storage_setup(order=order)
    cred = Credential.objects.get(bucket__order=order, active=True)
    env = {"AWS_ACCESS_KEY_ID": cred.access_key_id, "AWS_SECRET_ACCESS_KEY": cred.secret,
           "AWS_REGION": "us-east-1", "AWS_DEFAULT_REGION": "us-east-1",
           "AWS_ENDPOINT_URL": embedded_s3.endpoint_url, "TRAINYARD_BUCKET": result.bucket,
           "AWS_CONFIG_FILE": str(tmp_path / "none"), "AWS_SHARED_CREDENTIALS_FILE": str(tmp_path / "none")}
    return result.bucket, env


def test_ddp_and_fsdp2_train_and_the_checkpoint_round_trips_through_the_bucket(bucket, admin_s3, tmp_path):
    name, env = bucket
    status, report, output = torchrun(tmp_path, {**env, "TRAINYARD_TEST_HOST": "1"},
                                      "--prefix", "acceptance/run-1", "--steps", "24")
    assert status == 0, output[-3000:]
    assert report["passed"] is True and report["test_host"] is True
    assert (report["world_size"], report["device"], report["versions"]["backend"]) == (2, "cpu", "gloo")
    assert report["autocast"] == "off"  # bf16 autocast only where the device supports it: CUDA
    assert 1_000_000 < report["model"]["parameters"] < 10_000_000
    for kind in ("ddp", "fsdp2"):
        losses = report["losses"][kind]
        assert len(losses) == 24 and losses[-1] < 0.5 * losses[0]
    checks = {c["name"]: c for c in report["checks"]}
    assert {c["status"] for c in checks.values()} == {"pass"}
    # Each rank trained on its own data: only averaged gradients keep the replicas equal.
    assert checks["DDP replicas identical"]["value"] == 0.0
    ckpt = report["checkpoint"]
    assert ckpt["bucket"] is True and ckpt["ok"] is True and ckpt["mismatched"] == 0
    assert ckpt["tensors"] > 20 and ckpt["upload"]["uploaded"] >= 3 and ckpt["download"]["downloaded"] >= 3
    keys = {o["Key"] for o in admin_s3.list_objects_v2(Bucket=name, Prefix="acceptance/run-1/")["Contents"]}
    # One shard file per rank plus DCP's metadata: a sharded checkpoint, read back from the bucket.
    assert {"acceptance/run-1/.metadata", "acceptance/run-1/__0_0.distcp",
            "acceptance/run-1/__1_0.distcp"} <= keys
    assert report["bandwidths"]["allreduce_busbw_gbps"] > 0
    assert report["versions"]["torch"].startswith("2.")


def test_a_node_that_is_not_a_test_host_needs_cuda(tmp_path):
    """Both ranks lack CUDA: both say so, rank 1 exits 0 and rank 0 writes the one report."""
    status, report, output = torchrun(tmp_path, {}, "--prefix", "p", nproc=2)
    assert status == 1, output[-2000:]
    assert report["passed"] is False
    [check] = report["checks"]
    assert (check["name"], check["status"]) == ("CUDA available", "fail")
    assert "finds no CUDA device" in check["detail"] and "not a test host" in check["detail"]
    assert "ranks 0, 1" in check["detail"]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_without_a_bucket_a_cluster_loads_the_checkpoint_from_each_nodes_own_disk(tmp_path):
    """Two "nodes" (one torchrun each, own work directory, as two hosts): DCP writes .metadata
    on rank 0's node only, yet node 1 must load too."""
    port, procs = _free_port(), []
    for node in (0, 1):
        procs.append(subprocess.Popen(
            [TORCHRUN, "--nnodes", "2", "--node-rank", str(node), "--nproc-per-node", "1",
             "--master-addr", "127.0.0.1", "--master-port", str(port), str(TRAIN_SMOKE),
             "--workdir", str(tmp_path / f"node{node}"), "--sync-tool", str(SYNC_TOOL),
             "--prefix", "p", "--steps", "4", "--layers", "1", "--min-loss-drop", "0"],
            env=_env({"TRAINYARD_TEST_HOST": "1", "TRAINYARD_NODE": f"node{node}"}),
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=tmp_path))
    outputs = [p.communicate(timeout=600)[0] for p in procs]

    report = json.loads((tmp_path / "node0" / REPORT_FILE).read_text())
    assert report["passed"], outputs[0][-3000:] + outputs[1][-3000:]
    ckpt = report["checkpoint"]
    assert (ckpt["ok"], ckpt["bucket"], ckpt["mismatched"]) == (True, False, 0)
    assert "from the nodes' own disks (no bucket ordered)" in ckpt["detail"]
    assert {p.name for p in (tmp_path / "node1/checkpoint").iterdir()} == {".metadata", "__1_0.distcp"}
    assert not (tmp_path / "node1" / REPORT_FILE).exists()  # rank 0's node reports


def test_the_ranks_agree_on_a_failure_and_a_drifted_replica_fails(tmp_path):
    out = tmp_path / "found.json"
    proc = subprocess.run([TORCHRUN, "--standalone", "--nproc-per-node", "2", str(HARNESS), str(out)],
                          env=_env({"TRAINYARD_TEST_HOST": "1"}), capture_output=True, text=True,
                          timeout=300, cwd=tmp_path)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-3000:]
    found = json.loads(out.read_text())
    assert (found["same"]["status"], found["same"]["value"]) == ("pass", 0.0)
    drifted = found["drifted"]
    assert (drifted["status"], drifted["value"]) == ("fail", 0.25)
    assert "DDP did not keep the gradients in sync" in drifted["detail"]
    assert found["oom"]["check"] == "DDP training"
    assert found["oom"]["detail"].startswith("out of GPU memory (CUDA out of memory. Tried to "
                                             "allocate 2.00 GiB) (rank 1 on ")
    assert "train-smoke rank 1" in proc.stderr and "Traceback" in proc.stderr  # detail for staff


@pytest.fixture(scope="module")
def smoke():
    spec = importlib.util.spec_from_file_location("train_smoke_under_test", TRAIN_SMOKE)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up
    try:
        spec.loader.exec_module(module)
        yield module
    finally:
        sys.modules.pop(spec.name, None)


def test_a_diverged_loss_fails_its_check_and_the_report_stays_json(smoke, tmp_path):
    check = smoke.loss_check("DDP loss falls", [6.2, 5.1, math.nan, math.nan], min_drop=0.3)
    assert (check["status"], check["detail"]) == ("fail", "loss diverged (nan) at step 3 of 4")
    smoke.write_report(str(tmp_path), {"losses": {"ddp": [6.2, math.nan, math.inf]}, "checks": [check]})
    text = (tmp_path / REPORT_FILE).read_text()
    assert "NaN" not in text and "Infinity" not in text
    assert json.loads(text)["losses"]["ddp"] == [6.2, None, None]


def test_a_sync_tool_that_hangs_is_a_reason_not_a_crash(smoke, tmp_path):
    sleeper = tmp_path / "sync.py"
    sleeper.write_text("import time\ntime.sleep(60)\n")
    args = Namespace(prefix="p", sync_python=sys.executable, sync_tool=str(sleeper), sync_timeout_s=1.0)
    summary = smoke.sync_tool(args, tmp_path, download=False)
    assert summary["ok"] is False
    assert summary["errors"] == ["the sync tool did not finish the upload within 1 s"]
