"""train_smoke.py run for real: torchrun, 2 gloo processes on CPU (a declared test host), DDP then
FSDP2, and the sharded checkpoint through the loopback S3 bucket with the order's issued key."""

import json
import os
import subprocess
import sys

import pytest

from provisioning.acceptance.markers import JOB_MARKER
from provisioning.acceptance.scripts import TRAIN_SMOKE
from provisioning.storage.models import Credential
from provisioning.storage.node import SYNC_TOOL
from provisioning.storage.services import storage_setup
from tests.provisioning.storage.conftest import make_storage_order

pytestmark = pytest.mark.torch
TORCHRUN = os.path.join(os.path.dirname(sys.executable), "torchrun")


def torchrun(tmp_path, env: dict, *args: str, nproc: int = 2) -> tuple[int, dict | None, str]:
    base = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "DJANGO", "TRAINYARD_"))}
    proc = subprocess.run(
        [TORCHRUN, "--standalone", "--nproc-per-node", str(nproc), str(TRAIN_SMOKE),
         "--workdir", str(tmp_path / "work"), "--sync-tool", str(SYNC_TOOL), *args],
        env={**base, "OMP_NUM_THREADS": "1", **env}, capture_output=True, text=True, timeout=600,
        cwd=tmp_path)
    markers = [line for line in proc.stdout.splitlines() if line.startswith(JOB_MARKER + " ")]
    assert len(markers) <= 1, proc.stdout  # rank 0 only, once
    report = json.loads(markers[0].split(" ", 1)[1]) if markers else None
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
    status, report, output = torchrun(tmp_path, {}, "--prefix", "p", nproc=1)
    assert status == 1, output[-2000:]
    assert report["passed"] is False
    [check] = report["checks"]
    assert (check["name"], check["status"]) == ("CUDA available", "fail")
    assert "finds no CUDA device" in check["detail"] and "not a test host" in check["detail"]
