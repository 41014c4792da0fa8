#!/usr/bin/env bash
# The acceptance scripts' start (provisioning/acceptance/scripts.py): the stack's launcher and
# Python must be installed (else TRAINYARD_ACCEPTANCE_ERROR and exit
# TRAINYARD_STACK_MISSING_STATUS); $1, under $TRAINYARD_ROOT, becomes an empty working directory
# of the script's own. Sets root, launcher, python and work.
acceptance_workdir() {
  root="${TRAINYARD_ROOT:-}"
  launcher="$root/etc/trainyard/launch.sh"
  python="$root/opt/trainyard/venv/bin/python"
  if [ ! -x "$launcher" ] || [ ! -x "$python" ]; then
    echo "TRAINYARD_ACCEPTANCE_ERROR the training stack is not installed on $TRAINYARD_NODE:" \
      "$launcher or $python is missing; run the stack step first"
    exit "$TRAINYARD_STACK_MISSING_STATUS"
  fi
  work="$root$1"
  rm -rf "$work" && mkdir -p "$work" || exit 75
}
