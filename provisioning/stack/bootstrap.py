"""``bootstrap.sh``: what the stack step runs on each node.

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
import shlex

from provisioning.stack.inputs import StackInputs
from provisioning.stack.launch import stack_command
from provisioning.stack.render import CONSTRAINTS_PATH, RenderedFile

# The oldest driver and CUDA the pinned torch runs on, per GPU generation: Blackwell (sm_100)
# needs the CUDA 12.8 runtime and the 570 driver; older generations 550 / 12.4.
MIN_VERSIONS = (("B200", "570", "12.8"), ("B100", "570", "12.8"), ("GB200", "570", "12.8"),
                ("RTX PRO 6000", "570", "12.8"))
MIN_DRIVER = "550"
MIN_CUDA = "12.4"
# nccl-tests, built on GPU nodes for acceptance's all_reduce_perf: tag v2.19.6 at this commit.
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
ib_ports=(@@IB_PORTS@@)
tracker=@@TRACKER@@
storage=@@STORAGE@@
prune=@@PRUNE@@
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
deploy="${TRAINYARD_DEPLOY_ID:-}"
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
  at_least "$driver" @@MIN_DRIVER@@ || fail "driver $driver is older than @@MIN_DRIVER@@ ($model)"
  at_least "${cuda:-0}" @@MIN_CUDA@@ || fail "CUDA ${cuda:-unknown} is older than @@MIN_CUDA@@ ($model)"
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
  [ "${#ib_ports[@]}" -gt 0 ] || fail "no InfiniBand port was found on this node"
  # Every port NCCL_IB_HCA names (every InfiniBand port the node has) at the ordered rate.
  local entry hca port block state rate layer bad=""
  for entry in "${ib_ports[@]}"; do
    hca=${entry%%:*}
    port=${entry##*:}
    block=$(ibstat "$hca" "$port" 2>&1) || { bad="$bad $entry (ibstat: ${block%%$'\n'*})"; continue; }
    state=$(awk '/^[[:space:]]*State:/ { print $2; exit }' <<< "$block")
    rate=$(awk '/^[[:space:]]*Rate:/ { print $2; exit }' <<< "$block")
    layer=$(awk -F': *' '/^[[:space:]]*Link layer:/ { print $2; exit }' <<< "$block")
    if [ "$layer" != InfiniBand ]; then
      bad="$bad $entry (link layer ${layer:-unknown})"
    elif [ "$state" != Active ] || [ "${rate:-0}" -lt "$ib_rate" ]; then
      bad="$bad $entry (${state:-unknown} at ${rate:-?} Gb/s)"
    fi
  done
  [ -z "$bad" ] || fail "InfiniBand ports not Active at $ib_rate Gb/s:$bad"
  echo "PASS ${#ib_ports[@]} InfiniBand port(s) Active at $ib_rate Gb/s or more: ${ib_ports[*]}"
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
  local real constraints=()
  real=$(cd "$venv" && pwd -P)  # the venv may be a link to a shared cache: scripts name the target
  if [ -f "$root@@CONSTRAINTS@@" ]; then constraints=(-c "$root@@CONSTRAINTS@@"); fi
  python3 -m venv "$real"
  DS_BUILD_OPS=0 "$real/bin/python" -m pip install --no-input --disable-pip-version-check \
    "${constraints[@]}" "${requirements[@]}"
  "$venv/bin/python" -c 'import torch; print("torch", torch.__version__)'
  printf '%s\n' "$key" > "$venv/.trainyard-requirements"
}

step_nccl_tests() {
  on_test_host "nccl-tests build (all_reduce_perf needs CUDA and NCCL)" && return 0
  local dir="$root@@NCCL_TESTS_DIR@@" cuda="${CUDA_HOME:-/usr/local/cuda}" nccl="${NCCL_HOME:-}"
  command -v git >/dev/null 2>&1 || fail "git not found: cannot fetch nccl-tests"
  command -v make >/dev/null 2>&1 || fail "make not found: cannot build nccl-tests"
  [ -x "$cuda/bin/nvcc" ] || fail "nvcc not found in $cuda: install the CUDA toolkit or set CUDA_HOME"
  if [ -z "$nccl" ]; then
    if [ -f /usr/include/nccl.h ]; then nccl=/usr; else
      fail "nccl.h not found: install libnccl-dev or set NCCL_HOME"; fi
  fi
  if [ ! -d "$dir/.git" ] || [ "$(git -C "$dir" rev-parse HEAD 2>/dev/null)" != @@NCCL_TESTS_COMMIT@@ ]; then
    rm -rf "$dir"
    git clone --quiet --branch @@NCCL_TESTS_TAG@@ @@NCCL_TESTS_REPO@@ "$dir"
    [ "$(git -C "$dir" rev-parse HEAD)" = @@NCCL_TESTS_COMMIT@@ ] \
      || fail "nccl-tests @@NCCL_TESTS_TAG@@ is not commit @@NCCL_TESTS_COMMIT@@: refusing to build it"
  fi
  make -C "$dir" -j "$(nproc)" MPI=0 CUDA_HOME="$cuda" NCCL_HOME="$nccl"
  [ -x "$dir/build/all_reduce_perf" ] || fail "nccl-tests built no $dir/build/all_reduce_perf"
  echo "built $dir/build/all_reduce_perf (nccl-tests @@NCCL_TESTS_TAG@@)"
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
  if [ "$storage" != 1 ] && [ "$prune" != 1 ]; then
    skip "checkpoint sync: no bucket ordered"
    return 0
  fi
  if can_enable_units "checkpoint sync timer"; then
    systemctl daemon-reload
    systemctl enable --now trainyard-checkpoint-sync.timer
  fi
}

run_step preflight_gpus "@@PREFLIGHT_KEY@@ $deploy"
run_step preflight_fabric_manager "@@PREFLIGHT_KEY@@ $deploy"
run_step preflight_topology "@@PREFLIGHT_KEY@@ $deploy"
run_step preflight_infiniband "@@PREFLIGHT_KEY@@ $deploy"
run_step files @@FILES_KEY@@
run_step python @@REQUIREMENTS_KEY@@
run_step nccl_tests @@NCCL_TESTS_COMMIT@@
run_step tracking @@FILES_KEY@@
run_step checkpoint_sync @@FILES_KEY@@
echo "bootstrap of @@HOST@@ done: . $root/etc/trainyard/env.sh; then train with $root@@TRAIN@@"
"""


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


def _heredoc(file: RenderedFile) -> str:
    end = "TRAINYARD_EOF_" + file.sha256[:12].upper()
    if end in file.content:
        raise ValueError(f"{file.name} contains its own heredoc delimiter")
    body = file.content if file.content.endswith("\n") else file.content + "\n"
    return f'  write_file "$root{file.path}" {file.mode} <<\'{end}\'\n{body}{end}'


def render_bootstrap_script(inputs: StackInputs, files: tuple[RenderedFile, ...]) -> str:
    requirements = " ".join(shlex.quote(p) for p in inputs.packages)
    ib_cluster = inputs.cluster and inputs.infiniband
    min_driver, min_cuda = min_versions(inputs.gpu_name)
    values = {
        "HOST": inputs.hostname, "ORDER": inputs.order, "STRATEGY": inputs.strategy,
        "GPUS": str(inputs.gpus_per_node), "MODEL": shlex.quote(gpu_model(inputs.gpu_name)),
        "MIN_DRIVER": min_driver, "MIN_CUDA": min_cuda, "INTERCONNECT": inputs.interconnect,
        "IB_CLUSTER": "1" if ib_cluster else "0", "IB_RATE": str(inputs.network_gbps),
        "IB_PORTS": " ".join(shlex.quote(p) for p in inputs.facts.ib_hcas) if ib_cluster else "",
        "CONSTRAINTS": CONSTRAINTS_PATH, "NCCL_TESTS_DIR": NCCL_TESTS_DIR,
        "NCCL_TESTS_REPO": NCCL_TESTS_REPO, "NCCL_TESTS_TAG": NCCL_TESTS_TAG,
        "NCCL_TESTS_COMMIT": NCCL_TESTS_COMMIT, "TRAIN": stack_command(inputs.strategy),
        "TRACKER": inputs.tracker or "none", "STORAGE": "1" if inputs.storage else "0",
        "PRUNE": "1" if inputs.prunes_checkpoints else "0",
        "REQUIREMENTS": requirements,
        "REQUIREMENTS_KEY": requirements_key(inputs.packages, inputs.constraints),
        "FILES_KEY": _key(*(f"{f.path} {f.sha256}" for f in files)),
        "PREFLIGHT_KEY": _key(str(inputs.gpus_per_node), inputs.gpu_name, inputs.interconnect,
                              str(ib_cluster), str(inputs.network_gbps), *inputs.facts.ib_hcas),
        "FILES": "\n".join(_heredoc(f) for f in files),
    }
    script = _SCRIPT
    # FILES goes last: file contents are never scanned for placeholders.
    for name, value in sorted(values.items(), key=lambda kv: kv[0] == "FILES"):
        script = script.replace(f"@@{name}@@", value)
    return script
