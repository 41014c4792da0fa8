"""What the stack step finds out on a node before it renders: the network interface that holds
the node's fabric address (``NCCL_SOCKET_IFNAME``, ``GLOO_SOCKET_IFNAME``) and, for an InfiniBand
cluster, every port whose link layer is InfiniBand (``NCCL_IB_HCA``; a ConnectX port running
Ethernet is left out: NCCL would treat it as RoCE). Ports are listed whatever their state: the
bootstrap's preflight checks each is Active at the ordered rate and fails naming the one that
is not. ``sh/discover.sh`` prints ``TRAINYARD_FACT key=value`` lines from the environment built
here; ``TRAINYARD_SYSFS`` (tests) stands in for ``/sys``."""

from __future__ import annotations

from provisioning.stack.inputs import NodeFacts, StackInputs
from provisioning.stack.shell import node_script

FACT = "TRAINYARD_FACT "



def discover_script() -> str:
    return node_script("discover")


def discover_env(inputs: StackInputs) -> dict[str, str]:
    return {"TRAINYARD_FABRIC_ADDRESS": inputs.fabric_address or "",
            "TRAINYARD_CLUSTER": "1" if inputs.cluster else "0",
            "TRAINYARD_INFINIBAND": "1" if inputs.cluster and inputs.infiniband else "0"}


def parse_facts(lines) -> NodeFacts:
    found = {}
    for line in lines:
        if line.startswith(FACT) and "=" in line:
            key, _, value = line[len(FACT):].partition("=")
            found[key.strip()] = value.strip()
    hcas = tuple(h for h in found.get("ib_hcas", "").split(",") if h)
    return NodeFacts(socket_ifname=found.get("socket_ifname", ""), ib_hcas=hcas)
