"""The shell scripts the acceptance step runs on a node (``stack/sh/acceptance_*.sh``). Each
carries the node-side files in its header and works in a directory of its own, so the two never
touch each other's files:

- job (``job_script``), in ``$TRAINYARD_ROOT/var/lib/trainyard/acceptance/job``:
  ``$TRAINYARD_ROOT/etc/trainyard/launch.sh train_smoke.py --workdir … --sync-tool …
  --sync-python … --prefix …``, the sync tool's Python being Trainyard's node tools. When the
  order has a bucket the settings of ``etc/trainyard/s3.env`` are exported (an order without one
  never reads that file: no other order's key). The launcher sources ``env.sh`` and runs
  ``torchrun`` over the local GPUs with the cluster's rendezvous. Rank 0 writes its report to
  ``report.json`` there; once the launcher has exited (no worker can write any more) the script
  prints it as ONE line ``TRAINYARD_ACCEPTANCE_REPORT <json>``, in one write.
- checks (``checks_script``), in ``…/acceptance/checks``: the stack's Python runs
  ``node_checks.py --gpus N …``, which prints ``TRAINYARD_NODE_CHECKS <json>``.

A node without the launcher (the stack is not installed) prints ``TRAINYARD_ACCEPTANCE_ERROR``
with the reason and exits ``STACK_MISSING``. The script's own exit status is not the verdict:
the step reads the marker lines.
"""

from __future__ import annotations

from pathlib import Path

from provisioning.acceptance.markers import JOB_MARKER
from provisioning.stack.paths import STATE
from provisioning.stack.shell import assignments, node_script
from provisioning.storage.node import SYNC_TOOL

NODE_DIR = Path(__file__).with_name("node")
TRAIN_SMOKE = NODE_DIR / "train_smoke.py"
NODE_CHECKS = NODE_DIR / "node_checks.py"
ACCEPTANCE_DIR = f"{STATE}/acceptance"
JOB_DIR = f"{ACCEPTANCE_DIR}/job"
CHECKS_DIR = f"{ACCEPTANCE_DIR}/checks"
REPORT_FILE = "report.json"  # train_smoke.py's rank 0 writes it in the job directory
STACK_MISSING = 3

# Prints the report file as one marker line in one write (json.dumps: no newline inside).
_PRINT_REPORT = ("import json, os, sys\n"
                 "try:\n"
                 "    text = json.dumps(json.load(open(sys.argv[1], encoding='utf-8')))\n"
                 "except (OSError, ValueError) as exc:\n"
                 "    print(f'acceptance: the job report {sys.argv[1]} is unreadable: {exc}')\n"
                 "    sys.exit(0)\n"
                 "data = f'{sys.argv[2]} {text}\\n'.encode()\n"
                 "while data:\n"
                 "    data = data[os.write(1, data):]\n")
# The header line of a job script whose checkpoint round trip goes through the order's bucket.
BUCKET_HEADER = assignments({"TRAINYARD_ACCEPTANCE_BUCKET": "1"})


def job_script(*, prefix: str, steps: int = 30, bucket: bool = False) -> str:
    """The training job on this node (one torchrun of the cluster's rendezvous); ``bucket``: the
    order has one, so the checkpoint round trip goes through it."""
    return node_script("acceptance_job", libs=("acceptance_workdir",), values={
        "TRAINYARD_ACCEPTANCE_DIR": JOB_DIR, "TRAINYARD_ACCEPTANCE_PREFIX": prefix,
        "TRAINYARD_ACCEPTANCE_STEPS": int(steps), "TRAINYARD_ACCEPTANCE_BUCKET": "1" if bucket else "0",
        "TRAINYARD_TRAIN_SMOKE": _text(TRAIN_SMOKE), "TRAINYARD_SYNC_TOOL": _text(SYNC_TOOL),
        "TRAINYARD_PRINT_REPORT": _PRINT_REPORT, "TRAINYARD_JOB_MARKER": JOB_MARKER,
        "TRAINYARD_STACK_MISSING_STATUS": STACK_MISSING})


def checks_script(*, gpus: int, baseline_busbw_gbps: float | None = None, probe_json: str = "",
                  probe_skip_reason: str = "") -> str:
    """This node's own checks (nccl-tests, DCGM, the memory probe)."""
    return node_script("acceptance_checks", libs=("acceptance_workdir",), values={
        "TRAINYARD_ACCEPTANCE_DIR": CHECKS_DIR, "TRAINYARD_GPUS": int(gpus),
        "TRAINYARD_BASELINE_BUSBW_GBPS": f"{float(baseline_busbw_gbps or 0):g}",
        "TRAINYARD_PROBE": probe_json, "TRAINYARD_PROBE_SKIP_REASON": probe_skip_reason,
        "TRAINYARD_TRAIN_SMOKE": _text(TRAIN_SMOKE),  # the memory probe builds its model
        "TRAINYARD_NODE_CHECKS_PY": _text(NODE_CHECKS),
        "TRAINYARD_STACK_MISSING_STATUS": STACK_MISSING})


def _text(path: Path) -> str:
    return path.read_text(encoding="utf-8")
