#!/usr/bin/env bash
# Trainyard: what this node's fabric looks like (read-only; provisioning/stack/discover.py).
# Prints TRAINYARD_FACT key=value lines. Environment: TRAINYARD_FABRIC_ADDRESS, TRAINYARD_CLUSTER
# and TRAINYARD_INFINIBAND (1 or 0), TRAINYARD_TEST_HOST; TRAINYARD_SYSFS (tests) for /sys.
set -euo pipefail

test_host="${TRAINYARD_TEST_HOST:-0}"
addr="${TRAINYARD_FABRIC_ADDRESS:-}"
cluster="${TRAINYARD_CLUSTER:?TRAINYARD_CLUSTER is not set}"
infiniband="${TRAINYARD_INFINIBAND:?TRAINYARD_INFINIBAND is not set}"
if [ "$cluster" = 1 ]; then
  addrs=$(ip -o addr show)  # read whole: an early-exiting reader would SIGPIPE under pipefail
  ifname=$(awk -v a="$addr" '{ split($4, p, "/"); if (p[1] == a) { print $2; exit } }' <<< "$addrs")
  if [ -z "$ifname" ]; then
    echo "no network interface holds the fabric address $addr"
    exit 1
  fi
  echo "TRAINYARD_FACT socket_ifname=$ifname"
else
  echo "single node: NCCL stays on this host, no fabric interface needed"
fi
if [ "$infiniband" = 1 ]; then
  hcas=""
  for layer in "${TRAINYARD_SYSFS:-/sys}"/class/infiniband/*/ports/*/link_layer; do
    [ -r "$layer" ] || continue
    [ "$(cat "$layer")" = InfiniBand ] || continue
    port=$(basename "$(dirname "$layer")")
    hca=$(basename "$(dirname "$(dirname "$(dirname "$layer")")")")
    hcas="${hcas:+$hcas,}$hca:$port"
  done
  if [ -n "$hcas" ]; then
    echo "TRAINYARD_FACT ib_hcas=$hcas"
  elif [ "$test_host" = 1 ]; then
    echo "SKIP InfiniBand HCAs: test host (TRAINYARD_TEST_HOST=1), no such hardware here"
  else
    echo "no InfiniBand port on this node (link layer InfiniBand)"
    exit 1
  fi
fi
