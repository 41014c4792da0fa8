"""The rendered bootstrap runs for real on sshd test hosts through the ssh driver, declared CPU
test hosts (``TRAINYARD_TEST_HOST=1``): it finishes, skips the hardware checks with their
reasons, a second run skips its done steps, a re-deploy with another plan rewrites the files and
leaves ``/data`` as it was, ``launch.sh`` runs a torch script in 2 gloo processes, and on a
two-host cluster each host's env.sh has its own rank.

The venv (torch==2.13.0, the CPU build from this machine's disk) is built once into a cache
directory keyed by its requirements, and each test root links to it: the bootstrap reuses a
venv whose marker matches, as it does on a re-deployed node."""

from __future__ import annotations

import hashlib
import subprocess
from pathlib import Path

import pytest

from provisioning.drivers.base import NodeTarget
from provisioning.drivers.ssh import SshDriver
from provisioning.stack.bundle import render_stack
from provisioning.stack.discover import discover_env, discover_script, parse_facts
from tests.conftest import missing_service
from tests.provisioning.sshd import SshdUnavailable, start_sshd
from tests.provisioning.stack.variants import L4, order
from tests.provisioning.stack.venv_cache import link_cached_venv

TINY = """import os, torch, torch.distributed as dist
dist.init_process_group("gloo")
total = torch.tensor([dist.get_rank() + 1.0])
dist.all_reduce(total)
# One write per line: torchrun runs workers unbuffered, where print() writes the text and the
# newline separately, so two ranks' lines could interleave.
os.write(1, (f"rank {dist.get_rank()} of {dist.get_world_size()} sum {total.item():.0f} "
             f"backend {os.environ['TRAINYARD_DIST_BACKEND']}\\n").encode())
dist.destroy_process_group()
"""


class Host:
    def __init__(self, base: Path, name: str):
        self.root = base / f"{name}-root"
        self.root.mkdir(parents=True)
        path = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
        self.sshd = start_sshd(base / f"{name}-sshd", env={"PATH": path,
                                                           "TRAINYARD_ROOT": str(self.root)})
        key = base / f"{name}-key"
        key.write_text(self.sshd.client_key_pem)
        key.chmod(0o600)
        self.hostname = name
        self.node = _Node(pk=len(name) + ord(name[-1]), hostname=name)
        self.driver = SshDriver(NodeTarget(
            hostname=name, address=f"{self.sshd.host}:{self.sshd.port}",
            options={"host_key": self.sshd.host_public_key, "private_key_file": str(key),
                     "connect_timeout_s": 5, "test_host": True}))

    def run(self, script: str, name: str, env=None) -> tuple[int, list[str]]:
        lines: list[str] = []
        result = self.driver.run(script, name=name, on_line=lines.append,
                                 env={"TRAINYARD_TEST_HOST": "1", **(env or {})}, timeout_s=900)
        return result.exit_status, lines


class _Node:
    def __init__(self, pk, hostname):
        self.pk, self.hostname = pk, hostname
        self.fabric_address = "127.0.0.1"  # the loopback is this test host's "fabric"
        self.driver, self.management_address = "ssh", "127.0.0.1"
        self.driver_options = {"test_host": True}
        self.nvme_devices = []


@pytest.fixture
def hosts(tmp_path):
    started = []
    try:
        for name in ("tt-node-a", "tt-node-b"):
            started.append(Host(tmp_path, name))
    except SshdUnavailable as exc:
        missing_service(f"this test needs real sshd test hosts: {exc}")
    yield started
    for host in started:
        host.sshd.stop()


def _env(path: Path) -> dict[str, str]:
    done = subprocess.run(["bash", "-c", f'. "{path}"; env -0'], capture_output=True, text=True,
                          env={"PATH": "/usr/bin:/bin"}, check=True)
    return dict(item.split("=", 1) for item in done.stdout.split("\0") if "=" in item)


def test_bootstrap_runs_reruns_and_launches_two_gloo_processes(hosts):
    host = hosts[0]
    stack = render_stack(order=order("ddp", sku=L4, tracker="tensorboard", storage=False),
                         node=host.node, nodes=[host.node])
    link_cached_venv(host.root, stack.inputs.packages)
    status, first = host.run(stack.bootstrap, "stack")
    assert status == 0, "\n".join(first[-30:])
    assert any(line.startswith("SKIP GPU count, model, driver, CUDA, persistence mode: test host")
               for line in first)
    assert any(line.startswith("SKIP NVLink topology") for line in first)
    assert "PASS" not in "\n".join(first)  # nothing claims a hardware check it did not make
    log = (host.root / "var" / "log" / "trainyard" / "bootstrap.log").read_text()
    assert "== files" in log and "wrote" in log
    for file in stack.files[1:]:
        on_host = host.root / file.path.lstrip("/")
        assert hashlib.sha256(on_host.read_bytes()).hexdigest() == file.sha256, file.name

    assert not (host.root / "data").exists()  # /data is the configure step's, never the stack's
    status, second = host.run(stack.bootstrap, "stack")
    assert status == 0, "\n".join(second[-30:])
    for step in ("preflight_gpus", "files", "python", "tracking", "checkpoint_sync"):
        assert f"== {step}: done before, skipping" in second, step

    # A re-deploy (a changed plan, a new deploy id) rewrites the stack's files, never /data.
    data = host.root / "data" / "checkpoints" / "step-10"
    data.mkdir(parents=True)
    (data / "__0_0.distcp").write_bytes(b"customer shard")
    before = {p: (p.read_bytes(), p.stat().st_mtime_ns) for p in (host.root / "data").rglob("*")
              if p.is_file()}
    redeployed = render_stack(order=order("ddp", sku=L4, tracker="tensorboard", storage=False,
                                          plan={"micro_batch": 2}), node=host.node, nodes=[host.node])
    status, third = host.run(redeployed.bootstrap, "stack")
    assert status == 0, "\n".join(third[-30:])
    assert "== files" in third and "== files: done before, skipping" not in third
    assert "export TRAINYARD_MICRO_BATCH=2" in (host.root / "etc/trainyard/env.sh").read_text()
    after = {p: (p.read_bytes(), p.stat().st_mtime_ns) for p in (host.root / "data").rglob("*")
             if p.is_file()}
    assert after == before

    (host.root / "tiny.py").write_text(TINY)
    status, out = host.run('"$TRAINYARD_ROOT/etc/trainyard/launch.sh" "$TRAINYARD_ROOT/tiny.py"',
                           "launch")
    assert status == 0, "\n".join(out[-30:])
    ranks = sorted(line for line in out if line.startswith("rank "))
    assert ranks == ["rank 0 of 2 sum 3 backend gloo", "rank 1 of 2 sum 3 backend gloo"], out[-30:]


def test_a_two_host_cluster_gets_its_ranks_and_the_fabric_interface(hosts):
    nodes = [h.node for h in hosts]
    for rank, host in enumerate(hosts):
        stack0 = render_stack(order=order("ddp", sku=L4), node=host.node, nodes=nodes)
        status, lines = host.run(discover_script(), "stack_discover", env=discover_env(stack0.inputs))
        assert status == 0, lines
        facts = parse_facts(lines)
        assert facts.socket_ifname == "lo"  # the interface that holds 127.0.0.1
        stack = render_stack(order=order("ddp", sku=L4), node=host.node, nodes=nodes, facts=facts)
        link_cached_venv(host.root, stack.inputs.packages)
        status, lines = host.run(stack.bootstrap, "stack")
        assert status == 0, "\n".join(lines[-30:])
        env = _env(host.root / "etc" / "trainyard" / "env.sh")
        assert (env["NODE_RANK"], env["NNODES"], env["NPROC_PER_NODE"], env["WORLD_SIZE"]) == (
            str(rank), "2", "2", "4")
        assert env["MASTER_ADDR"] == "127.0.0.1" and env["NCCL_SOCKET_IFNAME"] == "lo"
        assert env["TRAINYARD_DIST_BACKEND"] == "gloo"
        assert (host.root / "etc" / "nccl.conf").read_text().count("NCCL_SOCKET_IFNAME=lo") == 1

