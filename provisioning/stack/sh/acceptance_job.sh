#!/bin/bash
# The acceptance training job on this node (provisioning/acceptance/scripts.py): train_smoke.py
# through the stack's launcher (one torchrun of the cluster's rendezvous), the sync tool's Python
# being Trainyard's node tools. With an ordered bucket the settings of etc/trainyard/s3.env are
# exported first; an order without one never reads that file. Rank 0's report.json is printed as
# ONE line "TRAINYARD_ACCEPTANCE_REPORT <json>" in one write, once the launcher has exited.
# The exit status is not the verdict: the step reads the marker lines.
# Header: TRAINYARD_ACCEPTANCE_DIR (the job's directory under the root),
# TRAINYARD_ACCEPTANCE_PREFIX, TRAINYARD_ACCEPTANCE_STEPS, TRAINYARD_ACCEPTANCE_BUCKET
# (1: ordered), TRAINYARD_TRAIN_SMOKE and TRAINYARD_SYNC_TOOL (the files' text),
# TRAINYARD_PRINT_REPORT (Python), TRAINYARD_JOB_MARKER, TRAINYARD_STACK_MISSING_STATUS.
# Environment: TRAINYARD_NODE, TRAINYARD_NODE_RANK; TRAINYARD_ROOT (tests: a scratch root).
set -u

acceptance_workdir "$TRAINYARD_ACCEPTANCE_DIR"
printf '%s\n' "$TRAINYARD_TRAIN_SMOKE" > "$work/train_smoke.py"
printf '%s\n' "$TRAINYARD_SYNC_TOOL" > "$work/sync.py"
if [ "$TRAINYARD_ACCEPTANCE_BUCKET" = 1 ]; then
  if [ -f "$root/etc/trainyard/s3.env" ]; then
    set -a
    # shellcheck source=/dev/null
    . "$root/etc/trainyard/s3.env"
    set +a
  else
    echo "acceptance: the order has a bucket but $root/etc/trainyard/s3.env is missing: run the storage step"
  fi
fi
sync_python="$root/opt/trainyard/tools/bin/python"
echo "acceptance: train-smoke through $launcher"
"$launcher" "$work/train_smoke.py" --workdir "$work" --sync-tool "$work/sync.py" \
  --sync-python "$sync_python" --prefix "$TRAINYARD_ACCEPTANCE_PREFIX" \
  --steps "$TRAINYARD_ACCEPTANCE_STEPS"
job_status=$?
echo "acceptance: train-smoke exited $job_status"
if [ -f "$work/report.json" ]; then
  "$python" -c "$TRAINYARD_PRINT_REPORT" "$work/report.json" "$TRAINYARD_JOB_MARKER"
elif [ "${TRAINYARD_NODE_RANK:-0}" = 0 ]; then
  echo "acceptance: train-smoke wrote no report (the launcher exited $job_status)"
fi
exit 0
