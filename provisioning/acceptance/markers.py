"""The marker lines the node-side acceptance files print (one JSON object after the marker)."""

JOB_MARKER = "TRAINYARD_ACCEPTANCE_REPORT"  # train_smoke.py, rank 0
NODE_MARKER = "TRAINYARD_NODE_CHECKS"  # node_checks.py, once per node
ERROR_MARKER = "TRAINYARD_ACCEPTANCE_ERROR"  # the node script, when it cannot start the job
