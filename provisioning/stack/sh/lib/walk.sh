#!/usr/bin/env bash
# shellcheck shell=bash
# find, where an entry that goes away while it walks (another process's temporary files in /tmp)
# is not an error: findutils 4.9 exits 1 for a directory removed between listing and opening it,
# -ignore_readdir_race or not. Any other error fails as find's own does, its message on stderr.
walk() {
  local errors status
  { errors=$(find "$@" 2>&1 >&3 3>&-); status=$?; } 3>&1
  if [ "$status" -eq 0 ]; then
    return 0
  fi
  if [ -n "$errors" ] && ! grep -qv ': No such file or directory$' <<< "$errors"; then
    return 0
  fi
  printf '%s\n' "$errors" >&2
  return "$status"
}
