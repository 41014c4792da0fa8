"""The shell scripts the acceptance step runs on a node. Each carries the node-side files as
heredocs and works in a directory of its own, so the two never touch each other's files:

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

import shlex
from pathlib import Path

from provisioning.acceptance.markers import ERROR_MARKER, JOB_MARKER
from provisioning.stack.paths import TOOLS_PYTHON
from provisioning.storage.node import ENV_FILE, SYNC_TOOL

NODE_DIR = Path(__file__).with_name("node")
TRAIN_SMOKE = NODE_DIR / "train_smoke.py"
NODE_CHECKS = NODE_DIR / "node_checks.py"
LAUNCHER = "/etc/trainyard/launch.sh"
VENV_PYTHON = "/opt/trainyard/venv/bin/python"
ACCEPTANCE_DIR = "/var/lib/trainyard/acceptance"
JOB_DIR = f"{ACCEPTANCE_DIR}/job"
CHECKS_DIR = f"{ACCEPTANCE_DIR}/checks"
REPORT_FILE = "report.json"  # train_smoke.py's rank 0 writes it in the job directory
STACK_MISSING = 3
HEREDOC_END = "TRAINYARD_ACCEPTANCE_FILE_END"

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


def _carry(path: Path, target: str) -> str:
    text = path.read_text(encoding="utf-8")
    if HEREDOC_END in text:
        raise ValueError(f"{path.name} contains the heredoc delimiter {HEREDOC_END}")
    return f"cat > {target} <<'{HEREDOC_END}'\n{text}\n{HEREDOC_END}\n"


def _head(work: str) -> str:
    return f"""#!/bin/bash
set -u
root="${{TRAINYARD_ROOT:-}}"
launcher="$root{LAUNCHER}"
python="$root{VENV_PYTHON}"
if [ ! -x "$launcher" ] || [ ! -x "$python" ]; then
  echo "{ERROR_MARKER} the training stack is not installed on $TRAINYARD_NODE:" \\
    "$launcher or $python is missing; run the stack step first"
  exit {STACK_MISSING}
fi
work="$root{work}"
rm -rf "$work" && mkdir -p "$work" || exit 75
"""


def job_script(*, prefix: str, steps: int = 30, bucket: bool = False) -> str:
    """The training job on this node (one torchrun of the cluster's rendezvous); ``bucket``: the
    order has one, so the checkpoint round trip goes through it."""
    return "".join([
        _head(JOB_DIR),
        _carry(TRAIN_SMOKE, '"$work/train_smoke.py"'),
        _carry(SYNC_TOOL, '"$work/sync.py"'),
        f"""{_bucket_settings() if bucket else ""}sync_python="$root{TOOLS_PYTHON}"
echo "acceptance: train-smoke through $launcher"
"$launcher" "$work/train_smoke.py" --workdir "$work" --sync-tool "$work/sync.py" \\
  --sync-python "$sync_python" --prefix {shlex.quote(prefix)} --steps {int(steps)}
job_status=$?
echo "acceptance: train-smoke exited $job_status"
if [ -f "$work/{REPORT_FILE}" ]; then
  "$python" -c {shlex.quote(_PRINT_REPORT)} "$work/{REPORT_FILE}" {JOB_MARKER}
elif [ "${{TRAINYARD_NODE_RANK:-0}}" = 0 ]; then
  echo "acceptance: train-smoke wrote no report (the launcher exited $job_status)"
fi
exit 0
"""])


# Marks a job script whose checkpoint round trip goes through the order's bucket.
BUCKET_COMMENT = "# trainyard: the checkpoint round trip goes through the order's bucket"


def _bucket_settings() -> str:
    return f"""{BUCKET_COMMENT}
if [ -f "$root{ENV_FILE}" ]; then
  set -a; . "$root{ENV_FILE}"; set +a
else
  echo "acceptance: the order has a bucket but $root{ENV_FILE} is missing: run the storage step"
fi
"""


def checks_script(*, gpus: int, baseline_busbw_gbps: float | None = None, probe_json: str = "",
                  probe_skip_reason: str = "") -> str:
    """This node's own checks (nccl-tests, DCGM, the memory probe)."""
    return "".join([
        _head(CHECKS_DIR),
        _carry(TRAIN_SMOKE, '"$work/train_smoke.py"'),  # the memory probe builds its model
        _carry(NODE_CHECKS, '"$work/node_checks.py"'),
        f"""echo "acceptance: GPU checks of $TRAINYARD_NODE"
"$python" "$work/node_checks.py" --gpus {int(gpus)} \\
  --baseline-busbw-gbps {float(baseline_busbw_gbps or 0):g} \\
  --probe {shlex.quote(probe_json)} --probe-skip-reason {shlex.quote(probe_skip_reason)}
exit 0
"""])
