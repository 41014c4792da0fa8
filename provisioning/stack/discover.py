"""What the stack step finds out on a node before it renders: the network interface that holds
the node's fabric address (``NCCL_SOCKET_IFNAME``, ``GLOO_SOCKET_IFNAME``) and, for an InfiniBand
cluster, every port whose link layer is InfiniBand (``NCCL_IB_HCA``; a ConnectX port running
Ethernet is left out: NCCL would treat it as RoCE). Ports are listed whatever their state: the
bootstrap's preflight checks each is Active at the ordered rate and fails naming the one that
is not. The script prints ``TRAINYARD_FACT key=value`` lines; ``TRAINYARD_SYSFS`` (tests) stands
in for ``/sys``."""

from __future__ import annotations

import shlex

from provisioning.stack.inputs import NodeFacts, StackInputs

FACT = "TRAINYARD_FACT "

_SCRIPT = r"""#!/usr/bin/env bash
# Trainyard: what this node's fabric looks like (read-only).
set -euo pipefail
test_host="${TRAINYARD_TEST_HOST:-0}"
addr=@@ADDR@@
cluster=@@CLUSTER@@
infiniband=@@IB@@
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
"""


def discover_script(inputs: StackInputs) -> str:
    values = {"ADDR": shlex.quote(inputs.fabric_address or ""),
              "CLUSTER": "1" if inputs.cluster else "0",
              "IB": "1" if inputs.cluster and inputs.infiniband else "0"}
    script = _SCRIPT
    for name, value in values.items():
        script = script.replace(f"@@{name}@@", value)
    return script


def parse_facts(lines) -> NodeFacts:
    found = {}
    for line in lines:
        if line.startswith(FACT) and "=" in line:
            key, _, value = line[len(FACT):].partition("=")
            found[key.strip()] = value.strip()
    hcas = tuple(h for h in found.get("ib_hcas", "").split(",") if h)
    return NodeFacts(socket_ifname=found.get("socket_ifname", ""), ib_hcas=hcas)
