"""``bootstrap.sh``: what the stack step runs on each node.

``set -euo pipefail``; every step leaves a marker ``$root/var/lib/trainyard/bootstrap/<step>.done``
holding the key of what it did (the files' SHA-256, the requirements), so a re-run skips the
steps whose marker matches and redoes only what changed. Output goes to stdout (the step log)
and to ``$root/var/log/trainyard/bootstrap.log``.

Steps: preflight (GPU count and model against the SKU, driver and CUDA versions, persistence
mode, fabric manager on NVSwitch, NVLink topology against the SKU's interconnect, InfiniBand
ports at the ordered rate for a cluster); files (every rendered file, written atomically);
python (venv at ``$root/opt/trainyard/venv`` with the stack's pinned packages, reused when its
marker matches); tracking; checkpoint sync timer. On a test host (``TRAINYARD_TEST_HOST=1``) each
hardware check is skipped with its reason; on a real node a failed check fails the script.
The script never touches ``/data``: that is the configure step's.
"""

from __future__ import annotations

import hashlib
import shlex

from provisioning.stack.inputs import StackInputs
from provisioning.stack.render import RenderedFile

MIN_DRIVER = "550"
MIN_CUDA = "12.4"

_SCRIPT = r"""#!/usr/bin/env bash
# Trainyard bootstrap of @@HOST@@ (order @@ORDER@@, stack @@STRATEGY@@): preflight, files,
# Python environment, tracking, checkpoint sync. Re-runnable: done steps are skipped.
set -euo pipefail
root="${TRAINYARD_ROOT:-}"
test_host="${TRAINYARD_TEST_HOST:-0}"
# What this node was ordered as (rendered from the order).
gpus=@@GPUS@@
model=@@MODEL@@
interconnect=@@INTERCONNECT@@
ib_cluster=@@IB_CLUSTER@@
ib_rate=@@IB_RATE@@
tracker=@@TRACKER@@
storage=@@STORAGE@@
requirements=(@@REQUIREMENTS@@)
state="$root/var/lib/trainyard/bootstrap"
logdir="$root/var/log/trainyard"
mkdir -p "$state" "$logdir"
exec > >(tee -a "$logdir/bootstrap.log") 2>&1
echo "bootstrap of @@HOST@@ started $(date -u +%Y-%m-%dT%H:%M:%SZ)"

skip() { echo "SKIP $*"; }
fail() { echo "FAIL $*"; exit 1; }
on_test_host() {
  if [ "$test_host" = 1 ]; then
    skip "$1: test host (TRAINYARD_TEST_HOST=1), no such hardware here"
    return 0
  fi
  return 1
}
run_step() {
  local name=$1 key=$2
  if [ -f "$state/$name.done" ] && [ "$(cat "$state/$name.done")" = "$key" ]; then
    echo "== $name: done before, skipping"
    return 0
  fi
  echo "== $name"
  "step_$name"
  printf '%s\n' "$key" > "$state/$name.done"
}
write_file() {
  local target=$1 mode=$2 tmp
  mkdir -p "$(dirname "$target")"
  tmp=$(mktemp "$target.XXXXXX")
  cat > "$tmp"
  chmod "$mode" "$tmp"
  mv -f "$tmp" "$target"
  echo "wrote $target"
}
at_least() {
  [ "$(printf '%s\n%s\n' "$2" "$1" | sort -V | head -n 1)" = "$2" ]
}

step_preflight_gpus() {
  on_test_host "GPU count, model, driver, CUDA, persistence mode" && return 0
  command -v nvidia-smi >/dev/null 2>&1 || fail "nvidia-smi not found: no NVIDIA driver"
  # Whole outputs into variables, then here-strings: no early-closing reader in a pipe, so
  # pipefail never sees a SIGPIPE.
  local names found driver cuda persistence
  names=$(nvidia-smi --query-gpu=name --format=csv,noheader)
  found=$(grep -c . <<< "$names")
  [ "$found" -eq "$gpus" ] || fail "expected $gpus GPUs, found $found"
  if grep -viwq -- "$model" <<< "$names"; then
    fail "expected $gpus x $model, found: $(sort <<< "$names" | uniq -c | tr '\n' ' ')"
  fi
  echo "PASS $found x ${names%%$'\n'*}"
  driver=$(nvidia-smi --query-gpu=driver_version --format=csv,noheader)
  driver=${driver%%$'\n'*}
  cuda=$(nvidia-smi)
  cuda=$(sed -n 's/.*CUDA Version: *\([0-9.]*\).*/\1/p' <<< "$cuda")
  cuda=${cuda%%$'\n'*}
  at_least "$driver" @@MIN_DRIVER@@ || fail "driver $driver is older than @@MIN_DRIVER@@"
  at_least "${cuda:-0}" @@MIN_CUDA@@ || fail "CUDA ${cuda:-unknown} is older than @@MIN_CUDA@@"
  echo "PASS driver $driver, CUDA $cuda"
  persistence=$(nvidia-smi --query-gpu=persistence_mode --format=csv,noheader)
  if grep -vq Enabled <<< "$persistence"; then
    fail "persistence mode is off on some GPU (enable nvidia-persistenced)"
  fi
  echo "PASS persistence mode enabled"
}

step_preflight_fabric_manager() {
  if [ "$interconnect" != nvswitch ]; then
    skip "fabric manager: $interconnect system, no NVSwitch"
    return 0
  fi
  on_test_host "fabric manager" && return 0
  systemctl is-active --quiet nvidia-fabricmanager \
    || fail "nvidia-fabricmanager is not running: NVSwitch GPUs cannot talk to each other"
  echo "PASS nvidia-fabricmanager active"
}

step_preflight_topology() {
  on_test_host "NVLink topology ($interconnect)" && return 0
  local topo bad
  topo=$(nvidia-smi topo -m)
  printf '%s\n' "$topo"
  # nvswitch: NV# between all pairs; nvlink-bridge: NV# only within bridged pairs (0-1, 2-3, ...);
  # pcie: no NV# at all.
  bad=$(awk -v n="$gpus" -v mode="$interconnect" '
    $1 ~ /^GPU[0-9]+$/ {
      i = substr($1, 4) + 0
      if ($(i + 2) != "X") next
      for (j = 0; j < n; j++) {
        if (i == j) continue
        c = $(j + 2); nv = (c ~ /^NV[0-9]+$/)
        want = (mode == "nvswitch") ? 1 : (mode == "nvlink-bridge") ? (int(i / 2) == int(j / 2)) : 0
        if (nv != want) printf "GPU%d-GPU%d=%s ", i, j, c
      }
    }' <<< "$topo")
  [ -z "$bad" ] || fail "topology does not match $interconnect: $bad"
  echo "PASS topology matches $interconnect"
}

step_preflight_infiniband() {
  if [ "$ib_cluster" != 1 ]; then
    skip "InfiniBand: not an InfiniBand cluster order"
    return 0
  fi
  on_test_host "InfiniBand ports at $ib_rate Gb/s" && return 0
  command -v ibstat >/dev/null 2>&1 || fail "ibstat not found: no InfiniBand stack"
  local ports active
  ports=$(ibstat)
  active=$(awk -v rate="$ib_rate" '
    /^[[:space:]]*State:/ { state = $2 }
    /^[[:space:]]*Rate:/ { if (state == "Active" && $2 + 0 >= rate) n++ }
    END { print n + 0 }' <<< "$ports")
  [ "$active" -ge 1 ] || fail "no InfiniBand port is Active at $ib_rate Gb/s"
  echo "PASS $active InfiniBand port(s) Active at $ib_rate Gb/s or more"
}

step_files() {
@@FILES@@
}

step_python() {
  local venv="$root/opt/trainyard/venv" key=@@REQUIREMENTS_KEY@@
  if [ -x "$venv/bin/python" ] && [ "$(cat "$venv/.trainyard-requirements" 2>/dev/null)" = "$key" ]; then
    echo "reusing $venv: it holds ${requirements[*]}"
    return 0
  fi
  mkdir -p "$venv"
  local real
  real=$(cd "$venv" && pwd -P)  # the venv may be a link to a shared cache: scripts name the target
  python3 -m venv "$real"
  DS_BUILD_OPS=0 "$real/bin/python" -m pip install --no-input --disable-pip-version-check \
    "${requirements[@]}"
  "$venv/bin/python" -c 'import torch; print("torch", torch.__version__)'
  printf '%s\n' "$key" > "$venv/.trainyard-requirements"
}

can_enable_units() {
  if [ -n "$root" ]; then
    skip "$1: TRAINYARD_ROOT is set, the unit is written but not enabled"
    return 1
  fi
  if ! command -v systemctl >/dev/null 2>&1 || [ ! -d /run/systemd/system ]; then
    skip "$1: no running systemd on this host, the unit is written but not enabled"
    return 1
  fi
  return 0
}

step_tracking() {
  case "$tracker" in
    tensorboard)
      if can_enable_units "TensorBoard"; then
        systemctl daemon-reload
        systemctl enable --now trainyard-tensorboard.service
      fi ;;
    mlflow) echo "MLflow: runs go to \$TRAINYARD_DATA/mlruns (MLFLOW_TRACKING_URI in env.sh)" ;;
    wandb) echo "Weights & Biases: project @@ORDER@@ (WANDB_* in env.sh); run 'wandb login'" ;;
    *) echo "no experiment tracker ordered" ;;
  esac
}

step_checkpoint_sync() {
  if [ "$storage" != 1 ]; then
    skip "checkpoint sync: no bucket ordered"
    return 0
  fi
  if can_enable_units "checkpoint sync timer"; then
    systemctl daemon-reload
    systemctl enable --now trainyard-checkpoint-sync.timer
  fi
}

run_step preflight_gpus @@PREFLIGHT_KEY@@
run_step preflight_fabric_manager @@PREFLIGHT_KEY@@
run_step preflight_topology @@PREFLIGHT_KEY@@
run_step preflight_infiniband @@PREFLIGHT_KEY@@
run_step files @@FILES_KEY@@
run_step python @@REQUIREMENTS_KEY@@
run_step tracking @@FILES_KEY@@
run_step checkpoint_sync @@FILES_KEY@@
echo "bootstrap of @@HOST@@ done: . $root/etc/trainyard/env.sh; $root/etc/trainyard/launch.sh SCRIPT"
"""


def gpu_model(gpu_name: str) -> str:
    """What nvidia-smi's name contains as a word: "NVIDIA H100 SXM5 80GB" → "H100"."""
    words = gpu_name.removeprefix("NVIDIA ").split()
    if not words:
        return "NVIDIA"
    if words[0] in ("RTX", "GeForce") and len(words) > 1:
        return " ".join(words[: 3 if words[0] == "GeForce" else 2])
    return words[0]


def requirements_key(packages) -> str:
    """The venv marker: a venv whose marker matches holds exactly these requirements."""
    return _key(*packages)


def _key(*parts: str) -> str:
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:16]


def _heredoc(file: RenderedFile) -> str:
    end = "TRAINYARD_EOF_" + file.sha256[:12].upper()
    if end in file.content:
        raise ValueError(f"{file.name} contains its own heredoc delimiter")
    body = file.content if file.content.endswith("\n") else file.content + "\n"
    return f'  write_file "$root{file.path}" {file.mode} <<\'{end}\'\n{body}{end}'


def render_bootstrap_script(inputs: StackInputs, files: tuple[RenderedFile, ...]) -> str:
    requirements = " ".join(shlex.quote(p) for p in inputs.packages)
    ib_cluster = inputs.cluster and inputs.infiniband
    values = {
        "HOST": inputs.hostname, "ORDER": inputs.order, "STRATEGY": inputs.strategy,
        "GPUS": str(inputs.gpus_per_node), "MODEL": shlex.quote(gpu_model(inputs.gpu_name)),
        "MIN_DRIVER": MIN_DRIVER, "MIN_CUDA": MIN_CUDA, "INTERCONNECT": inputs.interconnect,
        "IB_CLUSTER": "1" if ib_cluster else "0", "IB_RATE": str(inputs.network_gbps),
        "TRACKER": inputs.tracker or "none", "STORAGE": "1" if inputs.storage else "0",
        "REQUIREMENTS": requirements,
        "REQUIREMENTS_KEY": requirements_key(inputs.packages),
        "FILES_KEY": _key(*(f"{f.path} {f.sha256}" for f in files)),
        "PREFLIGHT_KEY": _key(str(inputs.gpus_per_node), inputs.gpu_name, inputs.interconnect,
                              str(ib_cluster), str(inputs.network_gbps)),
        "FILES": "\n".join(_heredoc(f) for f in files),
    }
    script = _SCRIPT
    # FILES goes last: file contents are never scanned for placeholders.
    for name, value in sorted(values.items(), key=lambda kv: kv[0] == "FILES"):
        script = script.replace(f"@@{name}@@", value)
    return script
