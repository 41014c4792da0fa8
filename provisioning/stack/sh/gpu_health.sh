#!/bin/sh
# The ssh driver's health check (provisioning/drivers/ssh.py): one CSV line per GPU. $1:
# nvidia-smi's path or name, $2: the exit status when it is missing, $3: the fields to query.
command -v "$1" >/dev/null 2>&1 || exit "$2"
"$1" --query-gpu="$3" --format=csv,noheader,nounits
