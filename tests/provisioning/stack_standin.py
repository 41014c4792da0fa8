"""A stand-in for the training-stack bootstrap (engineer h3's, provisioning/stack/) while this
branch lacks it: ``render`` is a ``PROVISIONING_STACK_RENDERER`` that runs the configured
renderer's script, then creates what acceptance needs ONLY IF the real bootstrap did not:

- ``$TRAINYARD_ROOT/opt/trainyard/venv``: a venv with ``--system-site-packages`` from this
  project's Python, plus a ``.pth`` line that adds this project's site-packages (a venv made
  from inside a venv sees the base interpreter's packages, not the project's), so torch (CPU
  build) and boto3 are there without a download;
- ``$TRAINYARD_ROOT/etc/trainyard/launch.sh SCRIPT [ARGS...]``: sources env.sh and runs torchrun
  (2 processes on a declared test host; ``--standalone`` for one node), as the contract says.

At merge the lead points the tests at the real bootstrap and deletes this file.
"""

from __future__ import annotations

import shlex
import site
import sys

from django.utils.module_loading import import_string

REAL_RENDERER = "provisioning.stack.scripts.render_bootstrap"

LAUNCHER = r"""#!/bin/bash
set -eu
root="${TRAINYARD_ROOT:-}"
. "$root/etc/trainyard/env.sh"
nproc="${NPROC_PER_NODE:-1}"
if [ "${TRAINYARD_TEST_HOST:-}" = 1 ]; then nproc=2; fi
if [ "${NNODES:-1}" -gt 1 ]; then
  rdzv="--nnodes $NNODES --node-rank $NODE_RANK --master-addr $MASTER_ADDR --master-port $MASTER_PORT"
else
  rdzv="--standalone"
fi
export OMP_NUM_THREADS="${OMP_NUM_THREADS:-1}"
exec "$root/opt/trainyard/venv/bin/python" -m torch.distributed.run $rdzv --nproc-per-node "$nproc" "$@"
"""


def render(*, order, node, nodes) -> str:
    script = import_string(REAL_RENDERER)(order=order, node=node, nodes=nodes)
    project_site = site.getsitepackages()[0]
    version = f"python{sys.version_info.major}.{sys.version_info.minor}"
    return script.rstrip("\n").removesuffix("exit 0") + f"""
root="${{TRAINYARD_ROOT:-}}"
venv="$root/opt/trainyard/venv"
if [ ! -x "$venv/bin/python" ]; then
  echo "stand-in: creating $venv (the real bootstrap did not)"
  {shlex.quote(sys.executable)} -m venv --system-site-packages "$venv"
  echo {shlex.quote(project_site)} > "$venv/lib/{version}/site-packages/trainyard-project.pth"
fi
if [ ! -x "$root/etc/trainyard/launch.sh" ]; then
  echo "stand-in: writing $root/etc/trainyard/launch.sh (the real bootstrap did not)"
  cat > "$root/etc/trainyard/launch.sh" <<'TRAINYARD_LAUNCHER_END'
{LAUNCHER}TRAINYARD_LAUNCHER_END
  chmod 755 "$root/etc/trainyard/launch.sh"
fi
"""
