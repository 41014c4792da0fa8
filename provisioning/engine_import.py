"""Inventory from the engine: the nodes of one Ironic resource class imported as Trainyard nodes
of a SKU. The hardware Ironic reports (``node.properties``, as inspection or an operator set
them) is checked against the SKU first; a node whose facts do not match, or are not reported,
is listed with the mismatches and not imported. Imported nodes are enrolled (audited, as any
enrolment) and wait for an operator to accept them into stock, after their health check.

What a node must carry in Ironic:
- its name: the Trainyard hostname (RFC 1123);
- ``extra.address``: the address the installed system answers SSH on;
- ``properties``: ``gpu_count``, ``gpu_model``, ``memory_mb``, ``cpus`` (checked),
  ``nvme_devices`` (a list of device paths, optional: recorded for the hand-back).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.core.exceptions import PermissionDenied

from portal.catalog.models import ServerSKU
from portal.core.states import DomainError
from provisioning.drivers.ironic import EngineNode, IronicDriver, list_nodes
from provisioning.models import Node
from provisioning.services import node_enrol
from provisioning.states import WipeMethod

# Firmware and the kernel keep some memory: a node may report this much less than the SKU says.
MEMORY_TOLERANCE = 0.05


@dataclass(frozen=True)
class ImportLine:
    engine_node: str  # "name (uuid)"
    hostname: str
    outcome: str  # imported | would import | already enrolled | mismatch | refused
    problems: tuple[str, ...] = ()


def hardware_mismatches(sku: ServerSKU, properties: dict[str, Any]) -> list[str]:
    """What Ironic reports of a node that differs from the SKU, in words (empty: it matches)."""
    problems = []
    gpu_count = _number(properties.get("gpu_count"))
    if gpu_count is None:
        problems.append(f"GPU count not reported (properties.gpu_count); the SKU has "
                        f"{sku.gpu_count}")
    elif gpu_count != sku.gpu_count:
        problems.append(f"{gpu_count:g} GPUs, the SKU has {sku.gpu_count}")
    model = str(properties.get("gpu_model") or "").strip()
    if not model:
        problems.append(f"GPU model not reported (properties.gpu_model); the SKU has {sku.gpu.name}")
    elif sku.gpu.name.lower() not in model.lower() and model.lower() not in sku.gpu.name.lower():
        problems.append(f"GPU model {model!r}, the SKU has {sku.gpu.name}")
    memory_mb = _number(properties.get("memory_mb"))
    if memory_mb is None:
        problems.append(f"memory not reported (properties.memory_mb); the SKU has {sku.ram_gb} GB")
    elif memory_mb * 2**20 < (1 - MEMORY_TOLERANCE) * sku.ram_gb * 10**9:
        problems.append(f"{memory_mb * 2**20 / 10**9:.0f} GB of memory, the SKU has "
                        f"{sku.ram_gb} GB")
    cpus = _number(properties.get("cpus"))
    if cpus is not None and cpus < sku.cpu_cores:
        problems.append(f"{cpus:g} CPU cores, the SKU has {sku.cpu_cores}")
    nvme = properties.get("nvme_devices")
    if nvme is not None and not (isinstance(nvme, list) and all(isinstance(d, str) for d in nvme)):
        problems.append("properties.nvme_devices is not a list of device paths")
    return problems


def import_ironic_nodes(*, by, sku: ServerSKU, resource_class: str, dry_run: bool = False,
                        options: dict | None = None) -> list[ImportLine]:
    """Enrols the matching nodes of ``resource_class`` as nodes of ``sku``; one line per node.
    Idempotent: a node already enrolled (by Ironic UUID or hostname) is left as it is."""
    if not getattr(by, "is_operator", False):
        raise PermissionDenied("Only operators can import nodes into the inventory.")
    options = options if options is not None else settings.NODE_DRIVER_OPTIONS[IronicDriver.name]
    engine_nodes = list_nodes(options, resource_class=resource_class)
    enrolled = {str((n.driver_options.get("ironic") or {}).get("node") or n.hostname)
                for n in Node.objects.filter(driver=IronicDriver.name)}
    return [_import_one(node, by=by, sku=sku, enrolled=enrolled, dry_run=dry_run)
            for node in engine_nodes]


def _import_one(node: EngineNode, *, by, sku: ServerSKU, enrolled: set[str],
                dry_run: bool) -> ImportLine:
    label = f"{node.name or '(no name)'} ({node.uuid})"
    hostname = node.name
    if node.uuid in enrolled or (hostname and (
            hostname in enrolled or Node.objects.filter(hostname__iexact=hostname).exists())):
        return ImportLine(label, hostname, "already enrolled")
    problems = hardware_mismatches(sku, dict(node.properties))
    if problems:
        return ImportLine(label, hostname, "mismatch", tuple(problems))
    address = str(node.extra.get("address") or "").strip()
    if not hostname or not address:
        why = ("no name in Ironic (the name becomes the hostname)" if not hostname else
               "no extra.address in Ironic: the address the installed system answers SSH on")
        return ImportLine(label, hostname, "refused", (why,))
    if node.maintenance:
        return ImportLine(label, hostname, "refused", ("in maintenance in Ironic",))
    if dry_run:
        return ImportLine(label, hostname, "would import")
    nvme = list(node.properties.get("nvme_devices") or [])
    try:
        node_enrol(by=by, sku=sku, hostname=hostname, management_address=address,
                   driver=IronicDriver.name, driver_options={"ironic": {"node": node.uuid}},
                   nvme_devices=nvme, wipe_method=WipeMethod.DISCARD if nvme else WipeMethod.FILES,
                   notes=f"imported from Ironic (resource class {node.resource_class}, "
                         f"node {node.uuid})")
    except DomainError as exc:
        return ImportLine(label, hostname, "refused", (str(exc),))
    return ImportLine(label, hostname, "imported")


def _number(value) -> float | None:
    try:
        return float(value)
    except (TypeError, ValueError):
        return None
