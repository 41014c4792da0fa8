#!/bin/sh
# Kills the process group of execution $2 if it is still the one running on the node ($1: the
# fence directory; provisioning/drivers/ssh.py, when the worker lost its claim).
d="$1"; if [ "$(cat "$d/pgid.fence" 2>/dev/null)" = "$2" ]; then
  kill -TERM -- "-$(cat "$d/pgid")" 2>/dev/null; fi; exit 0
