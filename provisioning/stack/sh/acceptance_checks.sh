#!/bin/bash
# This node's own acceptance checks (provisioning/acceptance/scripts.py): the stack's Python runs
# node_checks.py (nccl-tests, DCGM, the memory probe, which builds train_smoke.py's model), which
# prints "TRAINYARD_NODE_CHECKS <json>". The exit status is not the verdict.
# Header: TRAINYARD_ACCEPTANCE_DIR (the checks' directory under the root), TRAINYARD_GPUS,
# TRAINYARD_BASELINE_BUSBW_GBPS, TRAINYARD_PROBE (JSON), TRAINYARD_PROBE_SKIP_REASON,
# TRAINYARD_TRAIN_SMOKE and TRAINYARD_NODE_CHECKS_PY (the files' text),
# TRAINYARD_STACK_MISSING_STATUS.
# Environment: TRAINYARD_NODE; TRAINYARD_ROOT (tests: a scratch root).
set -u

acceptance_workdir "$TRAINYARD_ACCEPTANCE_DIR"
printf '%s\n' "$TRAINYARD_TRAIN_SMOKE" > "$work/train_smoke.py"
printf '%s\n' "$TRAINYARD_NODE_CHECKS_PY" > "$work/node_checks.py"
echo "acceptance: GPU checks of $TRAINYARD_NODE"
"$python" "$work/node_checks.py" --gpus "$TRAINYARD_GPUS" \
  --baseline-busbw-gbps "$TRAINYARD_BASELINE_BUSBW_GBPS" \
  --probe "$TRAINYARD_PROBE" --probe-skip-reason "$TRAINYARD_PROBE_SKIP_REASON"
exit 0
