#!/usr/bin/env python3
"""Checkpoint sync: a directory <-> a bucket prefix. Runs on a node with only Python 3 and boto3.

    python sync.py --endpoint https://s3.example.com --bucket B --prefix run-1/ckpt DIR
    python sync.py --download --endpoint ... --bucket B --prefix run-1/ckpt DIR

Credentials come from the usual places (AWS_ACCESS_KEY_ID/…, AWS_PROFILE, ~/.aws/credentials);
the endpoint may also come from AWS_ENDPOINT_URL. Uploads use boto3's transfer manager
(multipart above --multipart-mib, parts in parallel). Each object carries its SHA-256 in
metadata (x-amz-meta-sha256): an object whose size and SHA-256 already match is skipped, so an
interrupted sync resumes where it stopped. Every transferred object is verified afterwards
(size and SHA-256 from a HEAD; downloads are hashed again). An upload never follows a symbolic
link (it runs as root over a directory the customer owns): links are skipped and counted.
Prints ONE JSON line; exit 0 when everything is in place and verified, 1 otherwise, 2 on bad
arguments.
"""

from __future__ import annotations

import os
import sys

# Run as a script from inside the repository, this file's folder (selectors.py, minio.py, …)
# would shadow the standard library and packages: drop it from the import path first.
if __name__ == "__main__" and sys.path and sys.path[0] == os.path.dirname(os.path.abspath(__file__)):
    sys.path.pop(0)

import argparse  # noqa: E402
import hashlib  # noqa: E402
import json  # noqa: E402
import stat  # noqa: E402
import threading  # noqa: E402
import time  # noqa: E402
from concurrent.futures import ThreadPoolExecutor  # noqa: E402
from pathlib import Path  # noqa: E402

import boto3  # noqa: E402
from boto3.s3.transfer import TransferConfig  # noqa: E402
from botocore.config import Config  # noqa: E402
from botocore.exceptions import BotoCoreError, ClientError  # noqa: E402

MIB = 1024 * 1024
META_KEY = "sha256"
_COUNT_LOCK = threading.Lock()


def _count(summary: dict, **increments: int) -> None:
    with _COUNT_LOCK:
        for name, value in increments.items():
            summary[name] += value


def sha256_of(path: Path, block: int = 8 * MIB) -> str:
    with open(path, "rb") as fh:
        return sha256_of_file(fh, block)


def sha256_of_file(fh, block: int = 8 * MIB) -> str:
    digest = hashlib.sha256()
    while chunk := fh.read(block):
        digest.update(chunk)
    return digest.hexdigest()


def make_client(args):
    config = Config(retries={"max_attempts": 5, "mode": "standard"},
                    s3={"addressing_style": args.addressing_style},
                    max_pool_connections=max(10, args.concurrency * args.files_in_parallel))
    session = boto3.session.Session(profile_name=args.profile) if args.profile else boto3.session.Session()
    return session.client("s3", endpoint_url=args.endpoint or None, region_name=args.region or None,
                          config=config)


def transfer_config(args) -> TransferConfig:
    return TransferConfig(multipart_threshold=args.multipart_mib * MIB,
                          multipart_chunksize=args.chunk_mib * MIB,
                          max_concurrency=args.concurrency, use_threads=True)


def object_key(prefix: str, rel: str) -> str:
    prefix = prefix.strip("/")
    return f"{prefix}/{rel}" if prefix else rel


def remote_objects(client, bucket: str, prefix: str) -> dict[str, int]:
    listed = {}
    list_prefix = prefix.strip("/") + "/" if prefix.strip("/") else ""
    for page in client.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=list_prefix):
        for obj in page.get("Contents", []):
            listed[obj["Key"]] = obj["Size"]
    return listed


def remote_sha256(client, bucket: str, key: str) -> tuple[int, str]:
    head = client.head_object(Bucket=bucket, Key=key)
    return head["ContentLength"], head.get("Metadata", {}).get(META_KEY, "")


def regular_files(root: Path) -> tuple[list[Path], int]:
    """The regular files under ``root`` and how many symbolic links were skipped: a link is never
    followed (the tool runs as root over directories a customer owns; a link could name any file
    of the node)."""
    files, links = [], 0
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        links += sum(os.path.islink(os.path.join(dirpath, d)) for d in dirnames)
        for name in filenames:
            path = Path(dirpath, name)
            mode = path.lstat().st_mode
            if stat.S_ISLNK(mode):
                links += 1
            elif stat.S_ISREG(mode):
                files.append(path)
    return sorted(files), links


def open_no_follow(path: Path):
    """Opens a file for reading, refusing one that became a symbolic link."""
    return os.fdopen(os.open(path, os.O_RDONLY | os.O_NOFOLLOW), "rb")


def upload(args) -> dict:
    client, root = make_client(args), Path(args.dir)
    if root.is_symlink() or not root.is_dir():
        raise SystemExit(_usage_error(f"{root} is not a directory (a symbolic link is not followed)"))
    files, links = regular_files(root)
    remote = remote_objects(client, args.bucket, args.prefix)
    config = transfer_config(args)
    summary = {"files": len(files), "uploaded": 0, "skipped": 0, "bytes_uploaded": 0,
               "links_skipped": links, "errors": []}

    def one(path: Path) -> None:
        key = object_key(args.prefix, path.relative_to(root).as_posix())
        with open_no_follow(path) as fh:
            size, digest = os.fstat(fh.fileno()).st_size, sha256_of_file(fh)
            if remote.get(key) == size and remote_sha256(client, args.bucket, key) == (size, digest):
                _count(summary, skipped=1)
                return
            fh.seek(0)
            client.upload_fileobj(fh, args.bucket, key, Config=config,
                                  ExtraArgs={"Metadata": {META_KEY: digest}})
        if remote_sha256(client, args.bucket, key) != (size, digest):
            raise RuntimeError(f"{key}: size or SHA-256 differs after upload")
        _count(summary, uploaded=1, bytes_uploaded=size)

    _run_all(one, files, args.files_in_parallel, summary)
    return summary


def download(args) -> dict:
    client, root = make_client(args), Path(args.dir)
    root.mkdir(parents=True, exist_ok=True)
    remote = remote_objects(client, args.bucket, args.prefix)
    config = transfer_config(args)
    list_prefix = args.prefix.strip("/") + "/" if args.prefix.strip("/") else ""
    summary = {"files": len(remote), "downloaded": 0, "skipped": 0, "bytes_downloaded": 0,
               "errors": []}

    def one(key: str) -> None:
        target = (root / key[len(list_prefix):]).resolve()
        if root.resolve() not in target.parents:
            raise RuntimeError(f"{key}: would be written outside {root}")
        size, digest = remote_sha256(client, args.bucket, key)
        if target.is_file() and target.stat().st_size == size and digest and sha256_of(target) == digest:
            _count(summary, skipped=1)
            return
        target.parent.mkdir(parents=True, exist_ok=True)
        partial = target.with_name(target.name + ".partial")
        client.download_file(args.bucket, key, str(partial), Config=config)
        if partial.stat().st_size != size or (digest and sha256_of(partial) != digest):
            partial.unlink(missing_ok=True)
            raise RuntimeError(f"{key}: size or SHA-256 differs after download")
        os.replace(partial, target)
        _count(summary, downloaded=1, bytes_downloaded=size)

    _run_all(one, sorted(remote), args.files_in_parallel, summary)
    return summary


def _run_all(fn, items, workers: int, summary: dict) -> None:
    def guarded(item):
        try:
            fn(item)
        except (BotoCoreError, ClientError, OSError, RuntimeError) as exc:
            with _COUNT_LOCK:
                summary["errors"].append(f"{item}: {type(exc).__name__}: {exc}"[:500])

    with ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
        list(pool.map(guarded, items))


def _usage_error(message: str) -> int:
    print(json.dumps({"ok": False, "errors": [message]}))
    return 2


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("dir", help="local directory (source for upload, target for --download)")
    parser.add_argument("--download", action="store_true", help="restore the prefix into DIR")
    parser.add_argument("--endpoint", default=os.environ.get("AWS_ENDPOINT_URL", ""))
    parser.add_argument("--bucket", required=True)
    parser.add_argument("--prefix", default="")
    parser.add_argument("--region", default="")
    parser.add_argument("--profile", default="")
    parser.add_argument("--addressing-style", default="path", choices=["path", "virtual", "auto"])
    parser.add_argument("--concurrency", type=int, default=8, help="parts in flight per file")
    parser.add_argument("--files-in-parallel", type=int, default=4)
    parser.add_argument("--multipart-mib", type=int, default=64, help="multipart above this size")
    parser.add_argument("--chunk-mib", type=int, default=64, help="part size")
    return parser.parse_args(argv)


def main(argv=None) -> int:
    args = parse_args(argv)
    started = time.monotonic()
    try:
        summary = download(args) if args.download else upload(args)
    except (BotoCoreError, ClientError) as exc:
        summary = {"errors": [f"{type(exc).__name__}: {exc}"[:500]]}
    seconds = time.monotonic() - started
    moved = summary.get("bytes_uploaded", summary.get("bytes_downloaded", 0))
    summary = {"ok": not summary["errors"], "mode": "download" if args.download else "upload",
               "bucket": args.bucket, "prefix": args.prefix, **summary,
               "seconds": round(seconds, 3), "mib_per_s": round(moved / MIB / seconds, 1) if seconds else 0}
    print(json.dumps(summary, sort_keys=False))
    return 0 if summary["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
