"""Checkpoint upload throughput: multipart (boto3 transfer manager, parts in parallel) vs one
single-part PUT, for 64 MiB, 256 MiB and 1 GiB files side by side; then the sync tool's time to
re-sync an unchanged directory (hash + HEAD per file, nothing uploaded).

Starts its own S3 server on loopback (moto in server mode, in a separate process so client and
server do not share one GIL; IAM authorisation not enforced here). Loopback numbers measure the
client and this server, not a network: read them as ratios.

Run from the repository root: python bench/storage_bench.py
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import boto3
from boto3.s3.transfer import TransferConfig
from botocore.config import Config

ROOT = Path(__file__).resolve().parents[1]
MIB = 1024 * 1024
SIZES_MIB = (64, 256, 1024)
PART_MIB, CONCURRENCY = 16, 8
BUCKET = "bench"


def start_server() -> tuple[subprocess.Popen, str]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen([sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return proc, f"http://127.0.0.1:{port}"
        except OSError:
            time.sleep(0.1)
    proc.kill()
    raise SystemExit("moto server did not start")


def client(endpoint: str):
    return boto3.session.Session().client(
        "s3", endpoint_url=endpoint, region_name="us-east-1", aws_access_key_id="bench",
        aws_secret_access_key="bench",
        config=Config(s3={"addressing_style": "path"}, max_pool_connections=CONCURRENCY * 2,
                      retries={"max_attempts": 2, "mode": "standard"}))


def timed(fn) -> float:
    started = time.perf_counter()
    fn()
    return time.perf_counter() - started


def upload_pair(s3, path: Path, size_mib: int) -> tuple[float, float]:
    multipart = TransferConfig(multipart_threshold=PART_MIB * MIB, multipart_chunksize=PART_MIB * MIB,
                               max_concurrency=CONCURRENCY, use_threads=True)

    def single():
        with open(path, "rb") as fh:
            s3.put_object(Bucket=BUCKET, Key="single.bin", Body=fh)

    t_multi = timed(lambda: s3.upload_file(str(path), BUCKET, "multi.bin", Config=multipart))
    s3.delete_object(Bucket=BUCKET, Key="multi.bin")
    t_single = timed(single)
    s3.delete_object(Bucket=BUCKET, Key="single.bin")
    return size_mib / t_multi, size_mib / t_single


def resync(endpoint: str, directory: Path) -> tuple[dict, dict]:
    env = {**os.environ, "AWS_ACCESS_KEY_ID": "bench", "AWS_SECRET_ACCESS_KEY": "bench",
           "AWS_DEFAULT_REGION": "us-east-1"}
    cmd = [sys.executable, str(ROOT / "provisioning" / "storage" / "sync.py"), "--endpoint", endpoint,
           "--bucket", BUCKET, "--prefix", "ckpt", str(directory)]
    runs = [json.loads(subprocess.run(cmd, env=env, capture_output=True, text=True, check=True)
                       .stdout.strip()) for _ in range(2)]
    return runs[0], runs[1]


def main() -> None:
    proc, endpoint = start_server()
    try:
        s3 = client(endpoint)
        s3.create_bucket(Bucket=BUCKET)
        rows = []
        with tempfile.TemporaryDirectory() as tmp:
            for size in SIZES_MIB:
                path = Path(tmp) / f"ckpt-{size}.bin"
                with open(path, "wb") as fh:
                    for _ in range(size):
                        fh.write(os.urandom(MIB))
                rows.append((size, *upload_pair(s3, path, size)))
                path.unlink()
            ckpt = Path(tmp) / "ckpt"
            (ckpt / "shards").mkdir(parents=True)
            for i in range(32):
                (ckpt / "shards" / f"optim-{i:02d}.pt").write_bytes(os.urandom(4 * MIB))
            (ckpt / "model.safetensors").write_bytes(os.urandom(128 * MIB))
            first, again = resync(endpoint, ckpt)
    finally:
        proc.terminate()
        proc.wait(timeout=10)

    print(f"Checkpoint upload to a loopback S3 server (moto), parts of {PART_MIB} MiB, "
          f"{CONCURRENCY} in flight")
    print(f"{'file':>8} | {'multipart MiB/s':>15} | {'single PUT MiB/s':>16} | {'multi/single':>12}")
    print(f"{'-' * 8}-+-{'-' * 15}-+-{'-' * 16}-+-{'-' * 12}")
    for size, multi, single in rows:
        label = f"{size} MiB" if size < 1024 else f"{size // 1024} GiB"
        print(f"{label:>8} | {multi:>15.1f} | {single:>16.1f} | {multi / single:>11.2f}x")
    total_mib = 32 * 4 + 128
    print()
    print(f"Sync tool, {first['files']} files / {total_mib} MiB: first sync {first['seconds']:.2f} s "
          f"({first['uploaded']} uploaded); re-sync of the unchanged directory {again['seconds']:.2f} s "
          f"({again['uploaded']} uploaded, {again['skipped']} skipped); "
          f"ratio {again['seconds'] / first['seconds']:.2f}")


if __name__ == "__main__":
    main()
