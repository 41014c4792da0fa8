#!/usr/bin/env bash
# Trainyard bootstrap (provisioning/stack/bootstrap.py): preflight, files, Python environment,
# nccl-tests, tracking, checkpoint sync. Re-runnable: done steps are skipped.
# Header (rendered from the order and the node): what this node was ordered as (TRAINYARD_GPUS,
# TRAINYARD_GPU_MODEL, TRAINYARD_MIN_DRIVER, TRAINYARD_MIN_CUDA, TRAINYARD_INTERCONNECT,
# TRAINYARD_IB_CLUSTER, TRAINYARD_IB_RATE, TRAINYARD_IB_PORTS), TRAINYARD_TRACKER,
# TRAINYARD_STORAGE, TRAINYARD_PRUNE; the files to write (TRAINYARD_FILE_PATHS, _MODES, _TEXTS);
# the stack's pinned TRAINYARD_REQUIREMENTS and TRAINYARD_CONSTRAINTS; the pinned nccl-tests
# (TRAINYARD_NCCL_TESTS_*); the steps' keys (TRAINYARD_PREFLIGHT_KEY, TRAINYARD_FILES_KEY,
# TRAINYARD_REQUIREMENTS_KEY); TRAINYARD_BOOTSTRAP_HOST, TRAINYARD_BOOTSTRAP_ORDER,
# TRAINYARD_BOOTSTRAP_STATE (where the done markers go, under the root), TRAINYARD_TRAIN_COMMAND.
# Environment: TRAINYARD_TEST_HOST, TRAINYARD_DEPLOY_ID; TRAINYARD_ROOT.
set -euo pipefail

root="${TRAINYARD_ROOT:-}"
test_host="${TRAINYARD_TEST_HOST:-0}"
gpus="$TRAINYARD_GPUS"
model="$TRAINYARD_GPU_MODEL"
interconnect="$TRAINYARD_INTERCONNECT"
ib_cluster="$TRAINYARD_IB_CLUSTER"
ib_rate="$TRAINYARD_IB_RATE"
ib_ports=("${TRAINYARD_IB_PORTS[@]}")
tracker="$TRAINYARD_TRACKER"
storage="$TRAINYARD_STORAGE"
prune="$TRAINYARD_PRUNE"
requirements=("${TRAINYARD_REQUIREMENTS[@]}")
state="$root$TRAINYARD_BOOTSTRAP_STATE"
logdir="$root/var/log/trainyard"
mkdir -p "$state" "$logdir"
exec > >(tee -a "$logdir/bootstrap.log") 2>&1
echo "bootstrap of $TRAINYARD_BOOTSTRAP_HOST started $(date -u +%Y-%m-%dT%H:%M:%SZ)"

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
  at_least "$driver" "$TRAINYARD_MIN_DRIVER" || fail "driver $driver is older than $TRAINYARD_MIN_DRIVER ($model)"
  at_least "${cuda:-0}" "$TRAINYARD_MIN_CUDA" || fail "CUDA ${cuda:-unknown} is older than $TRAINYARD_MIN_CUDA ($model)"
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
  local i
  for i in "${!TRAINYARD_FILE_PATHS[@]}"; do
    printf '%s' "${TRAINYARD_FILE_TEXTS[i]}" \
      | write_file "$root${TRAINYARD_FILE_PATHS[i]}" "${TRAINYARD_FILE_MODES[i]}"
  done
}

step_python() {
  local venv="$root/opt/trainyard/venv" key="$TRAINYARD_REQUIREMENTS_KEY"
  if [ -x "$venv/bin/python" ] && [ "$(cat "$venv/.trainyard-requirements" 2>/dev/null)" = "$key" ]; then
    echo "reusing $venv: it holds ${requirements[*]}"
    return 0
  fi
  mkdir -p "$venv"
  local real constraints=()
  real=$(cd "$venv" && pwd -P)  # the venv may be a link to a shared cache: scripts name the target
  if [ -f "$root$TRAINYARD_CONSTRAINTS" ]; then constraints=(-c "$root$TRAINYARD_CONSTRAINTS"); fi
  python3 -m venv "$real"
  DS_BUILD_OPS=0 "$real/bin/python" -m pip install --no-input --disable-pip-version-check \
    "${constraints[@]}" "${requirements[@]}"
  "$venv/bin/python" -c 'import torch; print("torch", torch.__version__)'
  printf '%s\n' "$key" > "$venv/.trainyard-requirements"
}

step_nccl_tests() {
  on_test_host "nccl-tests build (all_reduce_perf needs CUDA and NCCL)" && return 0
  local dir="$root$TRAINYARD_NCCL_TESTS_DIR" cuda="${CUDA_HOME:-/usr/local/cuda}" nccl="${NCCL_HOME:-}"
  command -v git >/dev/null 2>&1 || fail "git not found: cannot fetch nccl-tests"
  command -v make >/dev/null 2>&1 || fail "make not found: cannot build nccl-tests"
  [ -x "$cuda/bin/nvcc" ] || fail "nvcc not found in $cuda: install the CUDA toolkit or set CUDA_HOME"
  if [ -z "$nccl" ]; then
    if [ -f /usr/include/nccl.h ]; then nccl=/usr; else
      fail "nccl.h not found: install libnccl-dev or set NCCL_HOME"; fi
  fi
  if [ ! -d "$dir/.git" ] || [ "$(git -C "$dir" rev-parse HEAD 2>/dev/null)" != "$TRAINYARD_NCCL_TESTS_COMMIT" ]; then
    rm -rf "$dir"
    git clone --quiet --branch "$TRAINYARD_NCCL_TESTS_TAG" "$TRAINYARD_NCCL_TESTS_REPO" "$dir"
    [ "$(git -C "$dir" rev-parse HEAD)" = "$TRAINYARD_NCCL_TESTS_COMMIT" ] \
      || fail "nccl-tests $TRAINYARD_NCCL_TESTS_TAG is not commit $TRAINYARD_NCCL_TESTS_COMMIT: refusing to build it"
  fi
  make -C "$dir" -j "$(nproc)" MPI=0 CUDA_HOME="$cuda" NCCL_HOME="$nccl"
  [ -x "$dir/build/all_reduce_perf" ] || fail "nccl-tests built no $dir/build/all_reduce_perf"
  echo "built $dir/build/all_reduce_perf (nccl-tests $TRAINYARD_NCCL_TESTS_TAG)"
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
    wandb) echo "Weights & Biases: project $TRAINYARD_BOOTSTRAP_ORDER (WANDB_* in env.sh); run 'wandb login'" ;;
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

run_step preflight_gpus "$TRAINYARD_PREFLIGHT_KEY $deploy"
run_step preflight_fabric_manager "$TRAINYARD_PREFLIGHT_KEY $deploy"
run_step preflight_topology "$TRAINYARD_PREFLIGHT_KEY $deploy"
run_step preflight_infiniband "$TRAINYARD_PREFLIGHT_KEY $deploy"
run_step files "$TRAINYARD_FILES_KEY"
run_step python "$TRAINYARD_REQUIREMENTS_KEY"
run_step nccl_tests "$TRAINYARD_NCCL_TESTS_COMMIT"
run_step tracking "$TRAINYARD_FILES_KEY"
run_step checkpoint_sync "$TRAINYARD_FILES_KEY"
echo "bootstrap of $TRAINYARD_BOOTSTRAP_HOST done: . $root/etc/trainyard/env.sh; then train with $root$TRAINYARD_TRAIN_COMMAND"
