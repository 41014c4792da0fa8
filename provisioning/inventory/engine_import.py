"""Inventory from the engine: the nodes of one Ironic resource class, or the MAAS machines with a
tag, imported as Trainyard nodes of a SKU. The hardware the engine reports is checked against the
SKU first; a machine whose facts do not match, or are not reported, is listed with the mismatches
and not imported. Imported nodes are enrolled (audited, as any enrolment) and wait for an
operator to accept them into stock (the engine's word that they are free to deploy).

What a node must carry in Ironic:
- its name: the Trainyard hostname (RFC 1123);
- ``extra.address``: the address the installed system answers SSH on;
- ``properties``: ``gpu_count``, ``gpu_model``, ``memory_mb``, ``cpus`` (checked),
  ``nvme_devices`` (a list of device paths, optional: recorded for the hand-back).

What MAAS reports of a commissioned machine (``machines/`` and ``nodes/{id}/devices/``): its
hostname, ``ip_addresses`` (the first is the management address), ``memory`` (MiB),
``cpu_count``, its GPUs (devices of hardware type GPU: count and ``product_name``) and its NVMe
disks (``physicalblockdevice_set`` names ``nvme…``, less the boot disk); it must be *Ready*.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.core.exceptions import PermissionDenied

from portal.catalog.models import ServerSKU
from portal.core.states import DomainError
from provisioning.drivers import NodeDriver, NodeOptions
from provisioning.drivers.ironic import IronicDriver, list_nodes
from provisioning.drivers.maas import MaasDriver
from provisioning.drivers.maas_api import MaasApi, MaasApiKey
from provisioning.inventory.services import node_enrol
from provisioning.models import Node
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
    elif not _same_model(model, sku.gpu.name):
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


@dataclass(frozen=True)
class EngineMachine:
    """One machine as an engine lists it, in the facts the import checks."""

    engine_id: str  # Ironic's node UUID, MAAS's system id
    name: str  # becomes the hostname
    address: str  # the management address ("" when the engine gives none)
    facts: dict[str, Any]  # gpu_count, gpu_model, memory_mb, cpus, nvme_devices
    unavailable: str = ""  # why the engine would not deploy it now ("" when it would)


def import_ironic_nodes(*, by, sku: ServerSKU, resource_class: str, dry_run: bool = False,
                        options: dict | None = None) -> list[ImportLine]:
    """Enrols the matching nodes of ``resource_class`` as nodes of ``sku``; one line per node.
    Idempotent: a node already enrolled (by Ironic UUID or hostname) is left as it is."""
    require_operator(by)
    options = options if options is not None else settings.NODE_DRIVER_OPTIONS[IronicDriver.name]
    machines = [EngineMachine(engine_id=n.uuid, name=n.name, facts=dict(n.properties),
                              address=str(n.extra.get("address") or "").strip(),
                              unavailable="in maintenance in Ironic" if n.maintenance else "")
                for n in list_nodes(options, resource_class=resource_class)]
    enrolled, source = _enrolled(IronicDriver), f"Ironic (resource class {resource_class})"
    return [_import_one(m, by=by, sku=sku, enrolled=enrolled, dry_run=dry_run, driver=IronicDriver,
                        source=source,
                        no_address="no extra.address in Ironic: the address the installed system "
                                   "answers SSH on")
            for m in machines]


def import_maas_machines(*, by, sku: ServerSKU, tag: str, dry_run: bool = False,
                         options: dict | None = None) -> list[ImportLine]:
    """Enrols the matching MAAS machines tagged ``tag`` as nodes of ``sku``; one line each.
    Idempotent: a machine already enrolled (by system id or hostname) is left as it is."""
    require_operator(by)
    options = options if options is not None else settings.NODE_DRIVER_OPTIONS[MaasDriver.name]
    if not options.get("api_key"):
        raise DomainError("no MAAS API key: set MAAS_API_KEY_FILE")
    api = MaasApi(str(options.get("url") or ""), MaasApiKey.parse(str(options["api_key"])),
                  timeout_s=float(options.get("timeout_s", 30)), verify_tls=options.get("verify_tls", True))
    machines = [maas_machine(m, api.gpus(m["system_id"])) for m in api.machines(tags=[tag])]
    enrolled = _enrolled(MaasDriver)
    return [_import_one(m, by=by, sku=sku, enrolled=enrolled, dry_run=dry_run, driver=MaasDriver,
                        source=f"MAAS (tag {tag})",
                        no_address="no IP address in MAAS: give the machine a static or auto IP "
                                   "on the management subnet")
            for m in sorted(machines, key=lambda m: (m.name, m.engine_id))]


def maas_machine(machine: dict[str, Any], gpus: list[dict[str, Any]]) -> EngineMachine:
    """A MAAS machine (``machines/`` JSON) and its GPU devices as the facts the import checks."""
    models = sorted({str(g.get("product_name") or "").strip() for g in gpus} - {""})
    boot = (machine.get("boot_disk") or {}).get("name")
    nvme = [f"/dev/{d['name']}" for d in machine.get("physicalblockdevice_set") or ()
            if str(d.get("name", "")).startswith("nvme") and d.get("name") != boot]
    facts = {"gpu_count": len(gpus), "gpu_model": " / ".join(models) if models else None,
             "memory_mb": machine.get("memory"), "cpus": machine.get("cpu_count"),
             "nvme_devices": nvme}
    status = machine.get("status_name") or "unknown"
    addresses = machine.get("ip_addresses") or []
    return EngineMachine(engine_id=str(machine["system_id"]), name=str(machine.get("hostname") or ""),
                         address=str(addresses[0]) if addresses else "", facts=facts,
                         unavailable="" if status == "Ready" else f"{status} in MAAS, not Ready")


def require_operator(by) -> None:
    if not getattr(by, "is_operator", False):
        raise PermissionDenied("Only operators can import nodes into the inventory.")


def _enrolled(driver: type[NodeDriver]) -> set[str]:
    """The engine machines (else the hostnames) of the nodes already enrolled with ``driver``."""
    schema = driver.options_schema
    return {schema.parse(n.driver_options).engine_machine or n.hostname
            for n in Node.objects.filter(driver=driver.name)}


def _import_one(machine: EngineMachine, *, by, sku: ServerSKU, enrolled: set[str], dry_run: bool,
                driver: type[NodeDriver], source: str, no_address: str) -> ImportLine:
    label = f"{machine.name or '(no name)'} ({machine.engine_id})"
    hostname = machine.name
    if machine.engine_id in enrolled or (hostname and (
            hostname in enrolled or Node.objects.filter(hostname__iexact=hostname).exists())):
        return ImportLine(label, hostname, "already enrolled")
    problems = hardware_mismatches(sku, machine.facts)
    if problems:
        return ImportLine(label, hostname, "mismatch", tuple(problems))
    if not hostname or not machine.address:
        why = "no name in the engine (the name becomes the hostname)" if not hostname else no_address
        return ImportLine(label, hostname, "refused", (why,))
    if machine.unavailable:
        return ImportLine(label, hostname, "refused", (machine.unavailable,))
    if dry_run:
        return ImportLine(label, hostname, "would import")
    nvme = list(machine.facts.get("nvme_devices") or [])
    try:
        node_enrol(by=by, sku=sku, hostname=hostname, management_address=machine.address,
                   driver=driver.name, nvme_devices=nvme,
                   driver_options=driver.options_schema.dump(
                       NodeOptions(engine_machine=machine.engine_id), base={}),
                   wipe_method=WipeMethod.DISCARD if nvme else WipeMethod.FILES,
                   notes=f"imported from {source}, {machine.engine_id}")
    except DomainError as exc:
        return ImportLine(label, hostname, "refused", (str(exc),))
    return ImportLine(label, hostname, "imported")


def report_lines(lines: list[ImportLine], what: str) -> list[str]:
    """An import as text: one line per machine (its problems below it), then the outcomes counted."""
    out = []
    for line in lines:
        out.append(f"{line.outcome:17} {line.engine_node}")
        out += [f"{'':17}   - {problem}" for problem in line.problems]
    counts = {o: sum(1 for line in lines if line.outcome == o) for o in
              ("imported", "would import", "already enrolled", "mismatch", "refused")}
    out.append(f"{len(lines)} {what}: " + ", ".join(f"{n} {o}" for o, n in counts.items() if n))
    return out


def _model_words(name: str) -> set[str]:
    return set(re.findall(r"[a-z0-9]+", name.lower())) - {"nvidia", "corporation"}


def _same_model(reported: str, sold: str) -> bool:
    """Whether a reported GPU name is the SKU's: every word of one is in the other (MAAS names
    GPUs from the PCI ID database, e.g. "GH100 [H100 SXM5 80GB]" for "NVIDIA H100 SXM5 80GB")."""
    reported_words, sold_words = _model_words(reported), _model_words(sold)
    return bool(reported_words) and (sold_words <= reported_words or reported_words <= sold_words)


def _number(value) -> float | None:
    try:
        return float(value)
    except (TypeError, ValueError):
        return None
