"""The shell script the acceptance step runs on a node. It carries the node-side files as
heredocs (``node/train_smoke.py``, ``node/node_checks.py`` and the storage sync tool), then:

- job: ``$TRAINYARD_ROOT/etc/trainyard/launch.sh train_smoke.py --workdir … --sync-tool …
  --sync-python … --prefix …`` with the bucket settings of ``etc/trainyard/s3.env`` exported
  (the launcher sources ``env.sh`` and runs ``torchrun`` over the local GPUs with the cluster's
  rendezvous). Rank 0 prints ``TRAINYARD_ACCEPTANCE_REPORT <json>``.
- checks: ``$TRAINYARD_ROOT/opt/trainyard/venv/bin/python node_checks.py --gpus N …``, which
  prints ``TRAINYARD_NODE_CHECKS <json>``.

A node without the launcher (the stack is not installed) prints ``TRAINYARD_ACCEPTANCE_ERROR``
with the reason and exits ``STACK_MISSING``. The script's own exit status is not the verdict:
the step reads the marker lines (a failed check makes train-smoke exit 1 after printing).
"""

from __future__ import annotations

import shlex
from pathlib import Path

from provisioning.acceptance.markers import ERROR_MARKER
from provisioning.storage.node import ENV_FILE, SYNC_TOOL

NODE_DIR = Path(__file__).with_name("node")
TRAIN_SMOKE = NODE_DIR / "train_smoke.py"
NODE_CHECKS = NODE_DIR / "node_checks.py"
LAUNCHER = "/etc/trainyard/launch.sh"
VENV_PYTHON = "/opt/trainyard/venv/bin/python"
STACK_MISSING = 3
HEREDOC_END = "TRAINYARD_ACCEPTANCE_FILE_END"


def _carry(path: Path, target: str) -> str:
    text = path.read_text(encoding="utf-8")
    if HEREDOC_END in text:
        raise ValueError(f"{path.name} contains the heredoc delimiter {HEREDOC_END}")
    return f"cat > {target} <<'{HEREDOC_END}'\n{text}\n{HEREDOC_END}\n"


def acceptance_script(*, job: bool, checks: bool, prefix: str, gpus: int = 0,
                      baseline_busbw_gbps: float | None = None, probe_json: str = "",
                      probe_skip_reason: str = "", steps: int = 30) -> str:
    """The node script: the training job (``job``), this node's GPU checks (``checks``), or both."""
    parts = [f"""#!/bin/bash
set -u
root="${{TRAINYARD_ROOT:-}}"
launcher="$root{LAUNCHER}"
python="$root{VENV_PYTHON}"
if [ ! -x "$launcher" ] || [ ! -x "$python" ]; then
  echo "{ERROR_MARKER} the training stack is not installed on $TRAINYARD_NODE:" \
    "$launcher or $python is missing; run the stack step first"
  exit {STACK_MISSING}
fi
work="$root/var/lib/trainyard/acceptance"
rm -rf "$work" && mkdir -p "$work" || exit 75
"""]
    if job:
        parts.append(_carry(TRAIN_SMOKE, '"$work/train_smoke.py"'))
        parts.append(_carry(SYNC_TOOL, '"$work/sync.py"'))
        parts.append(f"""if [ -f "$root{ENV_FILE}" ]; then
  set -a; . "$root{ENV_FILE}"; set +a
fi
sync_python="$python"
if ! "$python" -c 'import boto3' >/dev/null 2>&1 && command -v python3 >/dev/null 2>&1; then
  sync_python=$(command -v python3)
fi
echo "acceptance: train-smoke through $launcher"
"$launcher" "$work/train_smoke.py" --workdir "$work" --sync-tool "$work/sync.py" \\
  --sync-python "$sync_python" --prefix {shlex.quote(prefix)} --steps {int(steps)}
job_status=$?
echo "acceptance: train-smoke exited $job_status"
""")
    if checks:
        parts.append(_carry(TRAIN_SMOKE, '"$work/train_smoke.py"') if not job else "")
        parts.append(_carry(NODE_CHECKS, '"$work/node_checks.py"'))
        parts.append(f"""echo "acceptance: GPU checks of $TRAINYARD_NODE"
"$python" "$work/node_checks.py" --gpus {int(gpus)} \\
  --baseline-busbw-gbps {float(baseline_busbw_gbps or 0):g} \\
  --probe {shlex.quote(probe_json)} --probe-skip-reason {shlex.quote(probe_skip_reason)}
""")
    parts.append("exit 0\n")
    return "".join(parts)
