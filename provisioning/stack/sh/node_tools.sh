#!/usr/bin/env bash
# Trainyard's own node-side runtime: a venv at /opt/trainyard/tools with the pinned packages the
# sync and restore tools need (boto3), made with the node's python3 at deploy. The tools never
# run from whatever python3 is first on the PATH, nor from the customer's training venv.
# Kept when its marker (the requirements' key) matches and it imports boto3; rebuilt otherwise.
# Exit 3: no python3 with venv on the node; 75: pip could not install (retried).
# Environment: TRAINYARD_TOOLS_REQUIREMENTS (pinned, space separated), TRAINYARD_TOOLS_KEY;
# TRAINYARD_ROOT (tests: a scratch root).
set -euo pipefail

root="${TRAINYARD_ROOT:-}"
tools="$root/opt/trainyard/tools"
key="${TRAINYARD_TOOLS_KEY:?TRAINYARD_TOOLS_KEY is not set}"
read -r -a requirements <<< "${TRAINYARD_TOOLS_REQUIREMENTS:?TRAINYARD_TOOLS_REQUIREMENTS is not set}"
marker="$tools/.trainyard-requirements"

if [ -x "$tools/bin/python" ] && [ "$(cat "$marker" 2>/dev/null)" = "$key" ] \
    && "$tools/bin/python" -c 'import boto3' 2>/dev/null; then
  echo "node tools present in /opt/trainyard/tools ($key)"
  exit 0
fi
if ! python=$(command -v python3); then
  echo "python3 not found on this node: install it (the OS image's python3 and python3-venv)"
  exit 3
fi
rm -rf "$tools"
mkdir -p "$(dirname "$tools")"
if ! "$python" -m venv "$tools"; then
  rm -rf "$tools"
  echo "$python -m venv failed: install python3-venv"
  exit 3
fi
if ! "$tools/bin/python" -m pip install --no-input --disable-pip-version-check -q --no-deps \
    "${requirements[@]}"; then
  echo "pip could not install the node tools' packages: ${requirements[*]}"
  exit 75
fi
"$tools/bin/python" -c 'import boto3' || { echo "boto3 does not import in $tools"; exit 3; }
echo "$key" > "$marker"
echo "node tools installed in /opt/trainyard/tools: ${requirements[*]}"
