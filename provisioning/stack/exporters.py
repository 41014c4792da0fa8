"""The monitoring exporters on a GPU node: NVIDIA's dcgm-exporter and node_exporter, each under a
systemd unit rendered here that binds the node's management address only (never the customer's
or the fabric network), installed by ``sh/exporters.sh``. Simulated nodes and declared test hosts
have none (``provisioning.monitoring.targets.has_exporters``)."""

from __future__ import annotations

import ipaddress

from django.conf import settings

from provisioning.drivers import split_address
from provisioning.stack.shell import node_script

DCGM_UNIT = "trainyard-dcgm-exporter.service"
NODE_UNIT = "trainyard-node-exporter.service"
# DCGM's host engine: datacenter-gpu-manager-4-core's unit, listening on loopback only.
DCGM_HOSTENGINE_UNIT = "nvidia-dcgm.service"
DCGM_HOSTENGINE = "localhost:5555"


def listen_host(management_address: str) -> str:
    """The address the exporters bind: the management address's host (IPv6 in brackets, as both
    exporters want it); a name is the node's own name for its management interface."""
    host, _ = split_address(management_address, 22)
    try:
        ip = ipaddress.ip_address(host)
    except ValueError:
        return host
    return f"[{ip}]" if ip.version == 6 else str(ip)


def unit(*, description: str, exec_start: str, needs: str = "") -> str:
    """A service unit; ``needs``: a unit it requires and starts after."""
    after = " ".join(filter(None, ["network-online.target", needs]))
    return "\n".join([
        "# Rendered by Trainyard (provisioning/stack/exporters.py); rewritten at each deploy.",
        "[Unit]", f"Description={description}", f"After={after}",
        "Wants=network-online.target", *([f"Requires={needs}"] if needs else []), "",
        "[Service]", f"ExecStart={exec_start}", "Restart=always", "RestartSec=5", "",
        "[Install]", "WantedBy=multi-user.target", ""])


def exporters_env(management_address: str) -> dict[str, str]:
    host = listen_host(management_address)
    # NVIDIA's own unit (dcgm-exporter packaging/config-files/systemd/nvidia-dcgm-exporter.service,
    # after nvidia-dcgm.service) with -a (--address, default ":9400": every interface) set to the
    # management address, and -r (--remote-hostengine-info): the exporter reads DCGM's host engine
    # (nv-hostengine on 127.0.0.1:5555, which dcgmi diag uses too) instead of embedding a second
    # one, as NVIDIA's docs ask where nv-hostengine runs.
    dcgm = unit(description="NVIDIA dcgm-exporter on the management address (Trainyard)",
                exec_start=f"/usr/bin/dcgm-exporter -f /etc/dcgm-exporter/default-counters.csv "
                           f"-a {host}:{settings.MONITORING_DCGM_EXPORTER_PORT} "
                           f"-r {DCGM_HOSTENGINE}",
                needs=DCGM_HOSTENGINE_UNIT)
    node = unit(description="Prometheus node_exporter on the management address (Trainyard)",
                exec_start=f"/usr/bin/prometheus-node-exporter "
                           f"--web.listen-address={host}:{settings.MONITORING_NODE_EXPORTER_PORT}")
    return {"TRAINYARD_DCGM_PACKAGES": " ".join(settings.MONITORING_DCGM_PACKAGES),
            "TRAINYARD_NODE_EXPORTER_PACKAGE": settings.MONITORING_NODE_EXPORTER_PACKAGE,
            "TRAINYARD_DCGM_UNIT": DCGM_UNIT, "TRAINYARD_DCGM_UNIT_TEXT": dcgm,
            "TRAINYARD_DCGM_HOSTENGINE_UNIT": DCGM_HOSTENGINE_UNIT,
            "TRAINYARD_NODE_UNIT": NODE_UNIT, "TRAINYARD_NODE_UNIT_TEXT": node}


def exporters_script() -> str:
    return node_script("exporters")
