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


def listen_host(management_address: str) -> str:
    """The address the exporters bind: the management address's host (IPv6 in brackets, as both
    exporters want it); a name is the node's own name for its management interface."""
    host, _ = split_address(management_address, 22)
    try:
        ip = ipaddress.ip_address(host)
    except ValueError:
        return host
    return f"[{ip}]" if ip.version == 6 else str(ip)


def unit(*, description: str, exec_start: str) -> str:
    return "\n".join([
        "# Rendered by Trainyard (provisioning/stack/exporters.py); rewritten at each deploy.",
        "[Unit]", f"Description={description}", "After=network-online.target",
        "Wants=network-online.target", "",
        "[Service]", f"ExecStart={exec_start}", "Restart=always", "RestartSec=5", "",
        "[Install]", "WantedBy=multi-user.target", ""])


def exporters_env(management_address: str) -> dict[str, str]:
    host = listen_host(management_address)
    # NVIDIA's own unit (dcgm-exporter packaging/config-files/systemd/nvidia-dcgm-exporter.service)
    # with -a (--address, default ":9400": every interface) set to the management address.
    dcgm = unit(description="NVIDIA dcgm-exporter on the management address (Trainyard)",
                exec_start=f"/usr/bin/dcgm-exporter -f /etc/dcgm-exporter/default-counters.csv "
                           f"-a {host}:{settings.MONITORING_DCGM_EXPORTER_PORT}")
    node = unit(description="Prometheus node_exporter on the management address (Trainyard)",
                exec_start=f"/usr/bin/prometheus-node-exporter "
                           f"--web.listen-address={host}:{settings.MONITORING_NODE_EXPORTER_PORT}")
    return {"TRAINYARD_DCGM_PACKAGES": " ".join(settings.MONITORING_DCGM_PACKAGES),
            "TRAINYARD_NODE_EXPORTER_PACKAGE": settings.MONITORING_NODE_EXPORTER_PACKAGE,
            "TRAINYARD_DCGM_UNIT": DCGM_UNIT, "TRAINYARD_DCGM_UNIT_TEXT": dcgm,
            "TRAINYARD_NODE_UNIT": NODE_UNIT, "TRAINYARD_NODE_UNIT_TEXT": node}


def exporters_script() -> str:
    return node_script("exporters")
