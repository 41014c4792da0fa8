#!/usr/bin/env python3
"""Packs a folder of small files into WebDataset tar shards (standard library only).

    pack-shards SRC OUT [--shard-mib 1024] [--prefix shard]

Files that share a path without extension form one sample (``a/0001.jpg`` + ``a/0001.json``
→ key ``a/0001``), as WebDataset expects: each sample's files sit next to each other in one
shard. Shards are ``OUT/<prefix>-000000.tar``, … of about --shard-mib each; a sample never
spans two shards. Prints one JSON line: shards, samples, files, bytes.
"""

from __future__ import annotations

import argparse
import json
import sys
import tarfile
from pathlib import Path

MIB = 1024 * 1024


def samples(src: Path) -> list[tuple[str, list[Path]]]:
    grouped: dict[str, list[Path]] = {}
    for path in sorted(p for p in src.rglob("*") if p.is_file()):
        rel = path.relative_to(src)
        key = str(rel.parent / rel.name.split(".", 1)[0]) if "." in rel.name else str(rel)
        grouped.setdefault(key.removeprefix("./"), []).append(path)
    return sorted(grouped.items())


def pack(src: Path, out: Path, *, shard_bytes: int, prefix: str) -> dict:
    if not src.is_dir():
        raise SystemExit(f"{src} is not a directory")
    out.mkdir(parents=True, exist_ok=True)
    shard, size, tar = 0, 0, None
    summary = {"shards": 0, "samples": 0, "files": 0, "bytes": 0}
    for key, paths in samples(src):
        sample_bytes = sum(p.stat().st_size for p in paths)
        if tar is not None and size and size + sample_bytes > shard_bytes:
            tar.close()
            tar, shard, size = None, shard + 1, 0
        if tar is None:
            tar = tarfile.open(out / f"{prefix}-{shard:06d}.tar", "w", format=tarfile.USTAR_FORMAT)
            summary["shards"] += 1
        for path in paths:
            extension = path.name.split(".", 1)[1] if "." in path.name else "bin"
            tar.add(path, arcname=f"{key}.{extension}", recursive=False)
            summary["files"] += 1
        size += sample_bytes
        summary["samples"] += 1
        summary["bytes"] += sample_bytes
    if tar is not None:
        tar.close()
    return summary


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("src", type=Path)
    parser.add_argument("out", type=Path)
    parser.add_argument("--shard-mib", type=int, default=1024)
    parser.add_argument("--prefix", default="shard")
    args = parser.parse_args(argv)
    if args.shard_mib < 1:
        parser.error("--shard-mib must be at least 1")
    print(json.dumps(pack(args.src, args.out, shard_bytes=args.shard_mib * MIB, prefix=args.prefix)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
