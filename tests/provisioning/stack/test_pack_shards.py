"""The data recipe's shard packer: a folder of small files becomes WebDataset tar shards, each
sample's files side by side in one shard, shards cut at the size asked for."""

import json
import subprocess
import sys
import tarfile

from provisioning.stack.data import PACK_SHARDS


def test_small_files_are_packed_into_webdataset_shards(tmp_path):
    src, out = tmp_path / "src", tmp_path / "shards"
    (src / "cats").mkdir(parents=True)
    for i in range(6):
        (src / "cats" / f"{i:04d}.jpg").write_bytes(b"x" * 300_000)
        (src / "cats" / f"{i:04d}.json").write_text(json.dumps({"label": i}))
    done = subprocess.run([sys.executable, str(PACK_SHARDS), str(src), str(out), "--shard-mib", "1"],
                          capture_output=True, text=True, check=True)
    summary = json.loads(done.stdout)
    assert (summary["samples"], summary["files"], summary["shards"]) == (6, 12, 2)
    names = []
    for shard in sorted(out.glob("shard-*.tar")):
        with tarfile.open(shard) as tar:
            members = tar.getnames()
        keys = [m.rsplit(".", 1)[0] for m in members]
        assert len(set(keys)) * 2 == len(members)  # a sample never spans two shards
        names += members
    assert names[:2] == ["cats/0000.jpg", "cats/0000.json"]


def test_a_missing_folder_is_a_clear_error(tmp_path):
    done = subprocess.run([sys.executable, str(PACK_SHARDS), str(tmp_path / "nope"),
                           str(tmp_path / "out")], capture_output=True, text=True)
    assert done.returncode != 0 and "is not a directory" in done.stderr
