"""``bootstrap.sh`` (``sh/bootstrap.sh``, what the node was ordered as and the files it writes in its
header): what the stack step runs on each node.

``set -euo pipefail``; every step leaves a marker ``$root/var/lib/trainyard/bootstrap/<step>.done``
holding the key of what it did (the files' SHA-256, the requirements), so a re-run skips the
steps whose marker matches and redoes only what changed. Output goes to stdout (the step log)
and to ``$root/var/log/trainyard/bootstrap.log``.

Steps: preflight (GPU count and model against the SKU, driver and CUDA versions against the GPU
generation's floor, persistence mode, fabric manager on NVSwitch, NVLink topology against the
SKU's interconnect, every InfiniBand port in ``NCCL_IB_HCA`` Active at the ordered rate for a
cluster); files (every rendered file, written atomically); python (venv at
``$root/opt/trainyard/venv`` with the stack's pinned packages and ``constraints.txt`` for what they
pull in, reused when its marker matches); nccl-tests (built at a pinned commit into
``$root/opt/trainyard/nccl-tests/build``, what acceptance runs); tracking; checkpoint sync timer.
The preflight markers carry ``TRAINYARD_DEPLOY_ID`` (the stack step's id, set by the step): a
retry of the same step skips checks that passed, a re-deploy checks the hardware again. On a test
host (``TRAINYARD_TEST_HOST=1``) each hardware check is skipped with its reason; on a real node a
failed check fails the script. The script never touches ``/data``: that is the configure step's.
"""

from __future__ import annotations

import hashlib

from provisioning.stack.inputs import StackInputs
from provisioning.stack.launch import stack_command
from provisioning.stack.paths import STATE
from provisioning.stack.render import CONSTRAINTS_PATH, RenderedFile
from provisioning.stack.shell import node_script

# The oldest driver and CUDA the pinned torch runs on, per GPU generation: Blackwell (sm_100)
# needs the CUDA 12.8 runtime and the 570 driver; older generations 550 / 12.4.
MIN_VERSIONS = (("B200", "570", "12.8"), ("B100", "570", "12.8"), ("GB200", "570", "12.8"),
                ("RTX PRO 6000", "570", "12.8"))
MIN_DRIVER = "550"
MIN_CUDA = "12.4"
# nccl-tests, built on GPU nodes for acceptance's all_reduce_perf: tag v2.19.6 at this commit.
BOOTSTRAP_STATE = f"{STATE}/bootstrap"  # each step's done marker
NCCL_TESTS_REPO = "https://github.com/NVIDIA/nccl-tests.git"
NCCL_TESTS_TAG = "v2.19.6"
NCCL_TESTS_COMMIT = "a0b82b2260cf5152b9f8c061bbf7eaf0ba096432"
NCCL_TESTS_DIR = "/opt/trainyard/nccl-tests"


def min_versions(gpu_name: str) -> tuple[str, str]:
    """(driver, CUDA) floors for the GPU model named ``gpu_name``."""
    for fragment, driver, cuda in MIN_VERSIONS:
        if fragment.lower() in gpu_name.lower():
            return driver, cuda
    return MIN_DRIVER, MIN_CUDA

def gpu_model(gpu_name: str) -> str:
    """What nvidia-smi's name contains as a word: "NVIDIA H100 SXM5 80GB" → "H100"."""
    words = gpu_name.removeprefix("NVIDIA ").split()
    if not words:
        return "NVIDIA"
    if words[0] in ("RTX", "GeForce") and len(words) > 1:
        return " ".join(words[: 3 if words[0] == "GeForce" else 2])
    return words[0]


def requirements_key(packages, constraints=()) -> str:
    """The venv marker: a venv whose marker matches holds exactly these requirements."""
    return _key(*packages, *(["-c"] if constraints else []), *constraints)


def _key(*parts: str) -> str:
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:16]


def render_bootstrap_script(inputs: StackInputs, files: tuple[RenderedFile, ...]) -> str:
    """``sh/bootstrap.sh`` with the order, the node and the files it writes in its header."""
    ib_cluster = inputs.cluster and inputs.infiniband
    min_driver, min_cuda = min_versions(inputs.gpu_name)
    return node_script("bootstrap", values={
        "TRAINYARD_BOOTSTRAP_HOST": inputs.hostname, "TRAINYARD_BOOTSTRAP_ORDER": inputs.order,
        "TRAINYARD_BOOTSTRAP_STATE": BOOTSTRAP_STATE,
        "TRAINYARD_GPUS": inputs.gpus_per_node, "TRAINYARD_GPU_MODEL": gpu_model(inputs.gpu_name),
        "TRAINYARD_MIN_DRIVER": min_driver, "TRAINYARD_MIN_CUDA": min_cuda,
        "TRAINYARD_INTERCONNECT": inputs.interconnect,
        "TRAINYARD_IB_CLUSTER": "1" if ib_cluster else "0", "TRAINYARD_IB_RATE": inputs.network_gbps,
        "TRAINYARD_IB_PORTS": tuple(inputs.facts.ib_hcas) if ib_cluster else (),
        "TRAINYARD_TRACKER": inputs.tracker or "none",
        "TRAINYARD_STORAGE": "1" if inputs.storage else "0",
        "TRAINYARD_PRUNE": "1" if inputs.prunes_checkpoints else "0",
        "TRAINYARD_REQUIREMENTS": tuple(inputs.packages), "TRAINYARD_CONSTRAINTS": CONSTRAINTS_PATH,
        "TRAINYARD_NCCL_TESTS_DIR": NCCL_TESTS_DIR, "TRAINYARD_NCCL_TESTS_REPO": NCCL_TESTS_REPO,
        "TRAINYARD_NCCL_TESTS_TAG": NCCL_TESTS_TAG, "TRAINYARD_NCCL_TESTS_COMMIT": NCCL_TESTS_COMMIT,
        "TRAINYARD_TRAIN_COMMAND": stack_command(inputs.strategy),
        "TRAINYARD_REQUIREMENTS_KEY": requirements_key(inputs.packages, inputs.constraints),
        "TRAINYARD_FILES_KEY": _key(*(f"{f.path} {f.sha256}" for f in files)),
        "TRAINYARD_PREFLIGHT_KEY": _key(str(inputs.gpus_per_node), inputs.gpu_name,
                                        inputs.interconnect, str(ib_cluster),
                                        str(inputs.network_gbps), *inputs.facts.ib_hcas),
        "TRAINYARD_FILE_PATHS": tuple(f.path for f in files),
        "TRAINYARD_FILE_MODES": tuple(f.mode for f in files),
        "TRAINYARD_FILE_TEXTS": tuple(f.content if f.content.endswith("\n") else f.content + "\n"
                                      for f in files),
    })
