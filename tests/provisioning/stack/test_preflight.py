"""The bootstrap's hardware preflight on a *real* node (no TRAINYARD_TEST_HOST): it runs for real
under bash with stand-ins for nvidia-smi, systemctl and ibstat that answer in the tools' own
output formats (recorded shapes: ``nvidia-smi topo -m`` matrix, ``ibstat`` port blocks). A
matching machine passes every check; each mismatch fails the script with its reason."""

import subprocess
from dataclasses import replace
from types import SimpleNamespace as NS

import pytest

from provisioning.stack.bundle import render_stack
from provisioning.stack.inputs import NodeFacts
from tests.provisioning.stack.variants import H100, node, order
from tests.provisioning.stack.venv_cache import link_cached_venv

NVIDIA_SMI = """#!/usr/bin/env bash
n=${FAKE_GPUS:-8}
case "$*" in
  *--query-gpu=name*) for ((i = 0; i < n; i++)); do echo "${FAKE_NAME:-NVIDIA H100 80GB HBM3}"; done ;;
  *--query-gpu=driver_version*) echo "${FAKE_DRIVER:-550.54.15}" ;;
  *--query-gpu=persistence_mode*) for ((i = 0; i < n; i++)); do echo "${FAKE_PM:-Enabled}"; done ;;
  "topo -m") cat "$FAKE_TOPO" ;;
  *) echo "| NVIDIA-SMI 550.54.15   Driver Version: 550.54.15   CUDA Version: 12.4 |" ;;
esac
"""
SYSTEMCTL = '#!/usr/bin/env bash\n[ "${FAKE_FM:-1}" = 1 ]\n'
# `ibstat CA PORT` prints that port's block; FAKE_IB_DOWN names one HCA whose port is down.
IBSTAT = """#!/usr/bin/env bash
state=${FAKE_IB_STATE:-Active}
if [ "$1" = "${FAKE_IB_DOWN:-}" ]; then state=Down; fi
printf "Port %s:\\n\\tState: %s\\n\\tPhysical state: LinkUp\\n\\tRate: %s\\n\\tLink layer: %s\\n" \\
  "$2" "$state" "${FAKE_IB_RATE:-400}" "${FAKE_IB_LAYER:-InfiniBand}"
"""
# nccl-tests: git clone makes a checkout at the pinned commit, make builds all_reduce_perf.
GIT = """#!/usr/bin/env bash
if [ "$1" = clone ]; then mkdir -p "${!#}/.git"; echo "clone $*" >> "$CALLS"; exit 0; fi
if [ "$3" = rev-parse ]; then echo "${FAKE_COMMIT:-a0b82b2260cf5152b9f8c061bbf7eaf0ba096432}"; fi
"""
MAKE = """#!/usr/bin/env bash
mkdir -p "$2/build"; printf '#!/bin/sh\\n' > "$2/build/all_reduce_perf"; chmod +x "$2/build/all_reduce_perf"
echo "make $*" >> "$CALLS"
"""


def topology(n: int, link) -> str:
    lines = ["\t" + "\t".join(f"GPU{j}" for j in range(n)) + "\tCPU Affinity\tNUMA Affinity"]
    for i in range(n):
        cells = ["X" if i == j else link(i, j) for j in range(n)]
        lines.append(f"GPU{i}\t" + "\t".join(cells) + "\t0-55\t0")
    legend = "Legend:\n  X    = Self\n  NV#  = Connection traversing a bonded set of # NVLinks\n"
    return "\n".join(lines) + "\n\n" + legend


NVSWITCH = lambda i, j: "NV18"  # noqa: E731
PCIE = lambda i, j: "SYS"  # noqa: E731


@pytest.fixture
def machine(tmp_path):
    bin_dir, root = tmp_path / "bin", tmp_path / "root"
    bin_dir.mkdir()
    root.mkdir()
    for name, body in (("nvidia-smi", NVIDIA_SMI), ("systemctl", SYSTEMCTL), ("ibstat", IBSTAT),
                       ("git", GIT), ("make", MAKE)):
        (bin_dir / name).write_text(body)
        (bin_dir / name).chmod(0o755)
    cuda = tmp_path / "cuda"
    (cuda / "bin").mkdir(parents=True)
    (cuda / "bin" / "nvcc").write_text("#!/bin/sh\n")
    (cuda / "bin" / "nvcc").chmod(0o755)
    cluster = [node(1), node(2)]

    def run(topo=NVSWITCH, sku=H100, **fakes) -> NS:
        # DDP with the fallback packages (torch, numpy): the venv the other sshd tests share
        ddp = order("ddp", sku=sku, network=("infiniband", 400), tracker="", storage=False)
        ddp.strategy = replace(ddp.strategy, packages=())
        stack = render_stack(order=ddp,
                             node=cluster[0], nodes=cluster,
                             facts=NodeFacts("ib0", ("mlx5_0:1", "mlx5_1:1")))
        link_cached_venv(root, stack.inputs.packages, stack.inputs.constraints)
        (tmp_path / "topo.txt").write_text(topology(sku.gpu_count, topo))
        env = {"PATH": f"{bin_dir}:/usr/local/bin:/usr/bin:/bin", "TRAINYARD_ROOT": str(root),
               "FAKE_TOPO": str(tmp_path / "topo.txt"), "CUDA_HOME": str(cuda),
               "NCCL_HOME": str(tmp_path / "nccl"), "CALLS": str(tmp_path / "calls"),
               **{k: str(v) for k, v in fakes.items()}}
        done = subprocess.run(["bash", "-c", stack.bootstrap], env=env, capture_output=True,
                              text=True, timeout=600)
        calls = (tmp_path / "calls").read_text().splitlines() if (tmp_path / "calls").exists() else []
        return NS(status=done.returncode, out=done.stdout + done.stderr, root=root, calls=calls)

    return run


def test_a_matching_machine_passes_every_check(machine):
    done = machine()
    assert done.status == 0, done.out[-3000:]
    for line in ("PASS 8 x NVIDIA H100 80GB HBM3", "PASS driver 550.54.15, CUDA 12.4",
                 "PASS persistence mode enabled", "PASS nvidia-fabricmanager active",
                 "PASS topology matches nvswitch",
                 "PASS 2 InfiniBand port(s) Active at 400 Gb/s or more: mlx5_0:1 mlx5_1:1"):
        assert line in done.out, line
    assert "SKIP" not in done.out.split("== files")[0]


@pytest.mark.parametrize("fakes, reason", [
    ({"FAKE_GPUS": 7}, "FAIL expected 8 GPUs, found 7"),
    ({"FAKE_DRIVER": "535.104.05"}, "FAIL driver 535.104.05 is older than 550"),
    ({"FAKE_PM": "Disabled"}, "FAIL persistence mode is off"),
    ({"FAKE_FM": 0}, "FAIL nvidia-fabricmanager is not running"),
    ({"topo": PCIE}, "FAIL topology does not match nvswitch: GPU0-GPU1=SYS"),
    ({"FAKE_DRIVER": "550.54.15", "sku": "b200"}, "FAIL driver 550.54.15 is older than 570 (B200)"),
    ({"FAKE_IB_RATE": 200}, "FAIL InfiniBand ports not Active at 400 Gb/s: mlx5_0:1 (Active at 200"),
    # every HCA at the ordered rate, not one active port (before, one of two sufficed)
    ({"FAKE_IB_DOWN": "mlx5_1"}, "FAIL InfiniBand ports not Active at 400 Gb/s: mlx5_1:1 (Down at 400"),
    ({"FAKE_IB_LAYER": "Ethernet"}, "mlx5_0:1 (link layer Ethernet) mlx5_1:1 (link layer Ethernet)"),
])
def test_a_mismatch_fails_with_its_reason(machine, fakes, reason):
    if fakes.pop("sku", None) == "b200":
        fakes["sku"] = NS(gpu_count=8, gpu=NS(name="NVIDIA B200"), cpu_cores=112,
                          interconnect="nvswitch")
        fakes["FAKE_NAME"] = "NVIDIA B200"
    done = machine(**fakes)
    assert done.status == 1
    assert reason in done.out, done.out[-2000:]
    assert "== files" not in done.out  # nothing is installed on a machine that failed preflight


BRIDGED = NS(gpu_count=4, gpu=NS(name="NVIDIA H100 NVL 94GB"), cpu_cores=64,
             interconnect="nvlink-bridge")


@pytest.mark.parametrize("topo, ok", [
    (lambda i, j: "NV12" if i // 2 == j // 2 else "SYS", True),  # bridged pairs 0-1 and 2-3
    (lambda i, j: "NV12", False),  # NVLink everywhere is not what a bridged box has
    (lambda i, j: "SYS", False),  # bridges missing
])
def test_an_nvlink_bridge_box_has_nvlink_only_within_its_pairs(machine, topo, ok):
    done = machine(topo=topo, sku=BRIDGED, FAKE_GPUS=4)
    if ok:
        assert "PASS topology matches nvlink-bridge" in done.out, done.out[-2000:]
        assert "SKIP fabric manager: nvlink-bridge system, no NVSwitch" in done.out
    else:
        assert done.status == 1 and "FAIL topology does not match nvlink-bridge" in done.out


def test_nccl_tests_are_built_at_the_pinned_commit_where_acceptance_looks_and_only_once(machine):
    done = machine()
    assert done.status == 0, done.out[-2000:]
    binary = done.root / "opt/trainyard/nccl-tests/build/all_reduce_perf"
    assert binary.exists() and "built " in done.out
    assert [c.split()[0] for c in done.calls] == ["clone", "make"]
    assert "--branch v2.19.6 https://github.com/NVIDIA/nccl-tests.git" in done.calls[0]
    again = machine()
    assert again.status == 0 and "== nccl_tests: done before, skipping" in again.out
    assert [c.split()[0] for c in again.calls] == ["clone", "make"]  # nothing new


def test_nccl_tests_at_another_commit_are_refused(machine):
    done = machine(FAKE_COMMIT="0" * 40)
    assert done.status == 1 and "FAIL nccl-tests v2.19.6 is not commit a0b82b22" in done.out


def test_a_redeploy_checks_the_hardware_again_and_a_retry_does_not(machine):
    first = machine(TRAINYARD_DEPLOY_ID="7-41")
    assert first.status == 0, first.out[-2000:]
    retry = machine(TRAINYARD_DEPLOY_ID="7-41")
    assert "== preflight_gpus: done before, skipping" in retry.out
    redeploy = machine(TRAINYARD_DEPLOY_ID="9-60", FAKE_GPUS=7)  # a GPU fell off since
    assert redeploy.status == 1 and "FAIL expected 8 GPUs, found 7" in redeploy.out
