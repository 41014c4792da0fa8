"""The node-side sync tool, run as a script (only boto3 needed) with the ISSUED key."""

import json
import os
import subprocess
import sys

import pytest

from provisioning.storage.models import Credential
from provisioning.storage.services import storage_setup
from tests.conftest import REPO_ROOT

SYNC = REPO_ROOT / "provisioning" / "storage" / "sync.py"
MIB = 1024 * 1024


@pytest.fixture
def bucket_env(db, order, embedded_s3, tmp_path):
    result = storage_setup(order=order)
    cred = Credential.objects.get(bucket__order=order, active=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "DJANGO"))}
    env.update(AWS_ACCESS_KEY_ID=cred.access_key_id, AWS_SECRET_ACCESS_KEY=cred.secret,
               AWS_DEFAULT_REGION="us-east-1", AWS_CONFIG_FILE=str(tmp_path / "none"),
               AWS_SHARED_CREDENTIALS_FILE=str(tmp_path / "none"))
    return result, env


def sync(env, bucket, directory, *extra) -> dict:
    proc = subprocess.run(
        [sys.executable, str(SYNC), "--endpoint", env["ENDPOINT"], "--bucket", bucket, "--prefix",
         "run-1/ckpt", "--multipart-mib", "5", "--chunk-mib", "5", str(directory), *extra],
        env=env, capture_output=True, text=True, timeout=120, cwd=directory.parent)
    lines = proc.stdout.strip().splitlines()
    assert len(lines) == 1, proc.stdout + proc.stderr
    summary = json.loads(lines[0])
    assert (proc.returncode == 0) == summary["ok"], proc.stderr
    return summary


def _tree(root):
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def test_upload_resync_and_download_round_trip(bucket_env, embedded_s3, tmp_path):
    result, env = bucket_env
    env["ENDPOINT"] = embedded_s3.endpoint_url
    src = tmp_path / "ckpt"
    (src / "shard").mkdir(parents=True)
    (src / "model.safetensors").write_bytes(os.urandom(12 * MIB + 123))  # multipart: 3 parts
    (src / "shard" / "optim-00.pt").write_bytes(os.urandom(300_000))
    (src / "trainer_state.json").write_text('{"step": 1000}')

    first = sync(env, result.bucket, src)
    assert first["ok"] and (first["files"], first["uploaded"], first["skipped"]) == (3, 3, 0)
    assert first["bytes_uploaded"] == 12 * MIB + 123 + 300_000 + len('{"step": 1000}')

    again = sync(env, result.bucket, src)
    assert again["ok"] and (again["uploaded"], again["skipped"], again["bytes_uploaded"]) == (0, 3, 0)

    (src / "trainer_state.json").write_text('{"step": 2000}')  # same size, new content
    changed = sync(env, result.bucket, src)
    assert (changed["uploaded"], changed["skipped"]) == (1, 2)

    restored = tmp_path / "restored"
    down = sync(env, result.bucket, restored, "--download")
    assert down["ok"] and down["downloaded"] == 3
    assert _tree(restored) == _tree(src)
    assert sync(env, result.bucket, restored, "--download")["downloaded"] == 0


def test_a_key_for_another_bucket_is_reported_not_raised(bucket_env, embedded_s3, tmp_path):
    result, env = bucket_env
    env["ENDPOINT"] = embedded_s3.endpoint_url
    src = tmp_path / "ckpt"
    src.mkdir()
    (src / "a.pt").write_bytes(b"a")
    summary = sync(env, result.bucket + "-not-mine", src)
    assert summary["ok"] is False and "AccessDenied" in summary["errors"][0]


def test_an_upload_never_follows_a_symbolic_link(bucket_env, embedded_s3, admin_s3, tmp_path):
    """It runs as root over a directory the customer owns: a link to a file or a directory the
    customer cannot read (a host key, /etc) must not carry it into the customer's bucket."""
    result, env = bucket_env
    env["ENDPOINT"] = embedded_s3.endpoint_url
    secret_dir = tmp_path / "etc-ssh"
    secret_dir.mkdir()
    (secret_dir / "ssh_host_ed25519_key").write_text("PRIVATE")
    src = tmp_path / "ckpt"
    src.mkdir()
    (src / "model.pt").write_bytes(b"weights")
    (src / "host.key").symlink_to(secret_dir / "ssh_host_ed25519_key")
    (src / "etc").symlink_to(secret_dir, target_is_directory=True)
    summary = sync(env, result.bucket, src)
    assert summary["ok"] and (summary["files"], summary["links_skipped"]) == (1, 2)
    keys = {o["Key"] for o in admin_s3.list_objects_v2(Bucket=result.bucket).get("Contents", [])}
    assert keys == {"run-1/ckpt/model.pt"}
    linked_root = tmp_path / "linked"
    linked_root.symlink_to(secret_dir, target_is_directory=True)
    proc = subprocess.run([sys.executable, str(SYNC), "--endpoint", env["ENDPOINT"], "--bucket",
                           result.bucket, str(linked_root)], env=env, capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 2 and "a symbolic link is not followed" in proc.stdout
