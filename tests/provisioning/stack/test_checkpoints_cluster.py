"""Checkpoints of a two-node torchtitan cluster, for real against the embedded S3 server: each
node's sync script copies its own shards (the first node's also the DCP .metadata) and prunes its
old steps after the copy; restore-checkpoints on a fresh node brings back every node's files, so
the node that lost its disk has the metadata and its own shards to resume from."""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest

from provisioning.stack.bundle import render_stack
from provisioning.storage.models import Credential
from provisioning.storage.services import storage_setup
from tests.provisioning.accounts import temporary_account
from tests.provisioning.stack.variants import CLUSTER, IB_FACTS, order
from tests.provisioning.stack.venv_cache import link_cached_tools
from tests.provisioning.storage.conftest import make_storage_order

STEPS = (100, 200, 300, 400, 500)


def _node_root(tmp_path, name, stack, env_file: str):
    root = tmp_path / name
    for file in stack.files:
        if file.name in ("sync-checkpoints", "restore-checkpoints", "trainyard-sync.py"):
            path = root / file.path.lstrip("/")
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(file.content)
            path.chmod(0o755)
    link_cached_tools(root)  # the node tools (boto3) the deploy step installs
    (root / "etc/trainyard").mkdir(parents=True, exist_ok=True)
    (root / "etc/trainyard/s3.env").write_text(env_file)
    return root


@pytest.mark.django_db
def test_every_node_syncs_prunes_and_a_fresh_node_restores_the_whole_checkpoint(
        storage_provider, embedded_s3, tmp_path):
    the_order = make_storage_order(storage_provider=storage_provider, storage_tb=1)
    bucket = storage_setup(order=the_order)
    cred = Credential.objects.get(bucket__order=the_order, active=True)
    env_file = (f"export AWS_ACCESS_KEY_ID={cred.access_key_id}\n"
                f"export AWS_SECRET_ACCESS_KEY={cred.secret}\n"
                f"export AWS_ENDPOINT_URL={embedded_s3.endpoint_url}\nexport AWS_REGION=us-east-1\n"
                f"export TRAINYARD_BUCKET={bucket.bucket}\n")
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "AWS_CONFIG_FILE": str(tmp_path / "none"),
           "AWS_SHARED_CREDENTIALS_FILE": str(tmp_path / "none")}
    stacks = [render_stack(order=order("torchtitan", network=("infiniband", 400)), node=n,
                           nodes=CLUSTER, facts=IB_FACTS) for n in CLUSTER]
    roots = []
    for rank, (n, stack) in enumerate(zip(CLUSTER, stacks, strict=True)):
        root = _node_root(tmp_path, n.hostname, stack, env_file)
        for step in STEPS:
            step_dir = root / f"data/checkpoints/step-{step}"
            step_dir.mkdir(parents=True)
            (step_dir / f"__{rank}_0.distcp").write_bytes(os.urandom(1000 + rank))
            if rank == 0:
                (step_dir / ".metadata").write_bytes(b"dcp metadata %d" % step)
        done = subprocess.run([str(root / "opt/trainyard/bin/sync-checkpoints")], env={
            **env, "TRAINYARD_ROOT": str(root)}, capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stdout + done.stderr
        assert "pruned step-100" in done.stdout and "pruned step-200" in done.stdout
        kept = sorted(p.name for p in (root / "data/checkpoints").iterdir())
        assert kept == ["step-300", "step-400", "step-500"]  # every node, not rank 0 only
        roots.append(root)

    # The second node's disk is replaced: restore every node's copy into the fresh one.
    fresh = _node_root(tmp_path, "gpu-02-new", stacks[1], env_file)
    done = subprocess.run([str(fresh / "opt/trainyard/bin/restore-checkpoints")], env={
        **env, "TRAINYARD_ROOT": str(fresh)}, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    step = fresh / "data/checkpoints/step-500"
    assert (step / ".metadata").read_bytes() == b"dcp metadata 500"  # written on the first node
    assert (step / "__1_0.distcp").read_bytes() == (
        roots[1] / "data/checkpoints/step-500/__1_0.distcp").read_bytes()
    assert (step / "__0_0.distcp").exists()


@pytest.mark.django_db
def test_the_sync_timer_copies_as_the_customer_what_the_customer_can_read(
        storage_provider, embedded_s3, admin_s3):
    """It runs as root from systemd, over a directory the customer owns: it copies as that owner,
    so a link or a rename in the customer's directory cannot reach a file of the node's."""
    the_order = make_storage_order(storage_provider=storage_provider, storage_tb=1)
    bucket = storage_setup(order=the_order)
    cred = Credential.objects.get(bucket__order=the_order, active=True)
    stack = render_stack(order=order("fsdp"), node=CLUSTER[0], nodes=[CLUSTER[0]])
    env_file = ("export AWS_SHARED_CREDENTIALS_FILE=$TRAINYARD_ROOT/etc/trainyard/s3-credentials\n"
                f"export AWS_PROFILE=trainyard\nexport AWS_ENDPOINT_URL={embedded_s3.endpoint_url}\n"
                f"export AWS_REGION=us-east-1\nexport TRAINYARD_BUCKET={bucket.bucket}\n")
    with temporary_account() as (customer, home):
        base = home.parent / f"node-{customer}"  # reachable by the account, unlike pytest's tmp
        try:
            root = _node_root(base, "root", stack, env_file)
            for path in (base, root, root / "opt", root / "opt/trainyard", root / "opt/trainyard/bin"):
                path.chmod(0o755)
            creds = root / "etc/trainyard/s3-credentials"
            creds.write_text(f"[trainyard]\naws_access_key_id = {cred.access_key_id}\n"
                             f"aws_secret_access_key = {cred.secret}\n")
            creds.chmod(0o600)
            data = root / "data/checkpoints/step-1"
            data.mkdir(parents=True)
            (data / "model.pt").write_bytes(b"mine")
            (data / "node.key").write_text("PRIVATE")  # root's, inside the customer's tree
            subprocess.run(["chown", "-R", f"{customer}:", str(root / "data")], check=True)
            subprocess.run(["chown", "root:", str(data / "node.key")], check=True)
            (data / "node.key").chmod(0o600)
            done = subprocess.run([str(root / "opt/trainyard/bin/sync-checkpoints")],
                                  capture_output=True, text=True, timeout=120,
                                  env={"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "HOME": str(base),
                                       "TRAINYARD_ROOT": str(root)})
        finally:
            shutil.rmtree(base, ignore_errors=True)
    assert done.returncode == 1, done.stdout + done.stderr  # one file it could not read
    assert "PermissionError" in done.stdout and "node.key" in done.stdout
    keys = {o["Key"] for o in admin_s3.list_objects_v2(Bucket=bucket.bucket).get("Contents", [])}
    assert "checkpoints/gpu-01/step-1/model.pt" in keys
    assert not [k for k in keys if k.endswith("node.key")]
