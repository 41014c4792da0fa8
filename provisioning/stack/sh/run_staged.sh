#!/bin/sh
# How the ssh driver runs every script (provisioning/drivers/ssh.py): receives it on stdin into a
# 0600 temp file, runs it with stdin closed and stderr on stdout, and removes it after. $1: the
# fence directory the script is given; the rest: what runs it (bash, or sudo -n bash).
f=$(mktemp "${TMPDIR:-/tmp}/trainyard-XXXXXXXX") || exit 126
trap 'rm -f "$f"' EXIT
cat > "$f" || exit 126
fence_dir="$1"
shift
"$@" "$f" "$fence_dir" </dev/null 2>&1
