#!/usr/bin/env bash
# Builds (once) a virtualenv with a pinned OpenStack Ironic for the tests' standalone engine and
# prints its directory. Cached outside the repo, keyed by the versions; a second call (or a
# parallel test worker, waiting on the lock) finds it ready. Exits non-zero when it cannot build.
#   IRONIC_VERSION (default below); TRAINYARD_IRONIC_PYTHON: the interpreter (default python3)
set -euo pipefail

IRONIC_VERSION="${IRONIC_VERSION:-39.0.0}"
PYTHON="${TRAINYARD_IRONIC_PYTHON:-python3}"
py_version="$("$PYTHON" -c 'import sys; print("%d.%d" % sys.version_info[:2])')"
cache="${XDG_CACHE_HOME:-$HOME/.cache}/trainyard"
venv="$cache/ironic-$IRONIC_VERSION-py$py_version"
mkdir -p "$cache"

exec 9>"$venv.lock"
flock 9
if [ -f "$venv/.complete" ]; then
  echo "$venv"
  exit 0
fi

started=$(date +%s)
rm -rf "$venv"
# A venv's scripts name their interpreter by absolute path, so it is built where it stays; the
# stamp written last marks it whole, and a failed build is removed.
trap 'rm -rf "$venv"' ERR
"$PYTHON" -m venv "$venv" >&2
"$venv/bin/pip" install --quiet --disable-pip-version-check "ironic==$IRONIC_VERSION" >&2
"$venv/bin/ironic-dbsync" --help >/dev/null 2>&1
touch "$venv/.complete"
echo "ironic $IRONIC_VERSION venv built in $(( $(date +%s) - started ))s: $venv" >&2
echo "$venv"
