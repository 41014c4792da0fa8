"""Inventory from MAAS: the machines with a tag imported as nodes of a SKU, against recorded MAAS
exchanges (tests/provisioning/maas_recorded.py names the MAAS source their shapes come from).
GPUs, memory and CPUs as MAAS commissioned them are checked against the SKU; a mismatch, a
machine that is not Ready or has no address is listed and not imported; an import is audited and
idempotent."""

from io import StringIO

import pytest
from django.core.exceptions import PermissionDenied
from django.core.management import call_command

from portal.catalog.models import ServerSKU
from provisioning.inventory.engine_import import hardware_mismatches, import_maas_machines
from provisioning.models import Node
from provisioning.states import NodeState
from tests.factories import H100_SKU, staff
from tests.provisioning.maas_recorded import RecordedMaas, gpu_json, machine_json

API_KEY = "cKeyAbc123:tKeyDef456:tSecretGhi789"


def _disk(name: str, device_id: int) -> dict:
    return {"system_id": "", "id": device_id, "name": name, "type": "physical",
            "path": f"/dev/disk/by-dname/{name}", "model": "SAMSUNG MZQL27T6HBLA",
            "size": 7681501126656, "block_size": 512, "tags": ["ssd"]}


def _machine(system_id: str, hostname: str, sku, *, status="Ready", memory_gib=None, tags=("h100",),
             addresses=("10.20.0.41",)) -> dict:
    disks = [_disk("nvme0n1", 1), _disk("nvme1n1", 2), _disk("nvme2n1", 3)]
    return machine_json(system_id, status, hostname=hostname, tag_names=list(tags),
                        memory=(memory_gib or sku.ram_gb) * 1024, cpu_count=sku.cpu_cores,
                        ip_addresses=list(addresses), physicalblockdevice_set=disks,
                        boot_disk=disks[0])


def _gpus(system_id: str, count: int, name="GH100 [H100 SXM5 80GB]") -> list[dict]:
    return [gpu_json(i, system_id, name, f"0000:{i + 0x18:02x}:00.0") for i in range(count)]


@pytest.fixture
def maas(httpserver, settings, catalog):
    sku = ServerSKU.objects.select_related("gpu").get(slug=H100_SKU)
    recorded = RecordedMaas(system_id="aa1111", hostname="h100-maas-01")
    recorded.status = "Ready"
    recorded.others = [
        _machine("bb2222", "h100-maas-02", sku, memory_gib=64),
        _machine("cc3333", "h100-maas-03", sku, status="Deployed"),
        _machine("dd4444", "h100-maas-04", sku, addresses=()),
        _machine("ee5555", "l4-maas-01", sku, tags=("l4",)),
    ]
    recorded.gpus = {"aa1111": _gpus("aa1111", sku.gpu_count), "bb2222": _gpus("bb2222", 4),
                     "cc3333": _gpus("cc3333", sku.gpu_count), "dd4444": _gpus("dd4444", sku.gpu_count)}
    url = recorded.serve(httpserver)
    own = _machine("aa1111", "h100-maas-01", sku)
    recorded.fields = {k: own[k] for k in ("memory", "cpu_count", "tag_names", "ip_addresses",
                                                   "physicalblockdevice_set", "boot_disk")}
    settings.NODE_DRIVER_OPTIONS = {**settings.NODE_DRIVER_OPTIONS,
                                    "maas": {"url": url, "api_key": API_KEY, "timeout_s": 5}}
    recorded.sku = sku
    return recorded


@pytest.mark.django_db
def test_matching_machines_are_imported_and_the_rest_listed_with_why(maas):
    operator = staff("operator", username="olga-maas")
    out = StringIO()
    call_command("import_maas_machines", sku=H100_SKU, tag="h100", by=operator.username, stdout=out)
    text = out.getvalue()

    node = Node.objects.get(hostname="h100-maas-01")
    assert node.driver == "maas" and node.state == NodeState.ENROLLED
    assert node.driver_options == {"system_id": "aa1111"}
    assert node.management_address == "10.20.0.41"
    assert node.nvme_devices == ["/dev/nvme1n1", "/dev/nvme2n1"]  # the boot disk is not data
    assert node.events.get(transition="enrol").actor == operator
    assert list(Node.objects.filter(driver="maas").values_list("hostname", flat=True)) == ["h100-maas-01"]
    assert "imported          h100-maas-01 (aa1111)" in text
    assert "mismatch          h100-maas-02 (bb2222)" in text
    assert "4 GPUs, the SKU has 8" in text and "69 GB of memory" in text
    assert "refused           h100-maas-03 (cc3333)" in text and "Deployed in MAAS, not Ready" in text
    assert "refused           h100-maas-04 (dd4444)" in text and "no IP address in MAAS" in text
    assert "l4-maas-01" not in text  # another tag
    assert text.rstrip().endswith("4 MAAS machine(s) tagged h100: 1 imported, 1 mismatch, 2 refused")
    devices = [s for s in maas.seen if s.path.endswith("/devices/")]
    assert {s.path for s in devices} == {f"/MAAS/api/2.0/nodes/{sid}/devices/"
                                         for sid in ("aa1111", "bb2222", "cc3333", "dd4444")}
    listed = [s for s in maas.seen if s.path == "/MAAS/api/2.0/machines/"]
    assert listed and all(("tags", "h100") in s.args for s in listed)
    assert all(s.headers["Authorization"].startswith("OAuth ") for s in maas.seen)


@pytest.mark.django_db
def test_a_second_import_changes_nothing_and_a_dry_run_enrols_nothing(maas):
    operator = staff("operator")
    dry = import_maas_machines(by=operator, sku=maas.sku, tag="h100", dry_run=True)
    assert [line.outcome for line in dry if line.hostname == "h100-maas-01"] == ["would import"]
    assert not Node.objects.filter(driver="maas").exists()
    import_maas_machines(by=operator, sku=maas.sku, tag="h100")
    again = import_maas_machines(by=operator, sku=maas.sku, tag="h100")
    assert [line.outcome for line in again if line.hostname == "h100-maas-01"] == ["already enrolled"]
    assert Node.objects.filter(driver="maas").count() == 1


@pytest.mark.django_db
def test_only_operators_import_and_a_refused_key_is_a_readable_error(maas, settings):
    with pytest.raises(PermissionDenied):
        import_maas_machines(by=staff("approver"), sku=maas.sku, tag="h100")
    maas.errors[("GET", "")] = [(401, "Authorization Error: Invalid API key.")]
    out = StringIO()
    with pytest.raises(Exception, match="Invalid API key"):
        call_command("import_maas_machines", sku=H100_SKU, tag="h100",
                     by=staff("operator", username="olga-key").username, stdout=out)
    assert not Node.objects.filter(driver="maas").exists()


@pytest.mark.parametrize("reported, matches", [
    ("GH100 [H100 SXM5 80GB]", True),  # the PCI ID database's name, as MAAS reports it
    ("NVIDIA H100 SXM5 80GB", True),
    ("GH100 [H100 PCIe]", False),
    ("GA100 [A100 SXM4 80GB]", False),
])
def test_a_gpu_name_is_the_skus_when_every_word_of_the_sku_is_in_it(catalog, reported, matches):
    sku = ServerSKU.objects.select_related("gpu").get(slug=H100_SKU)
    facts = {"gpu_count": sku.gpu_count, "gpu_model": reported, "memory_mb": sku.ram_gb * 1024,
             "cpus": sku.cpu_cores}
    problems = hardware_mismatches(sku, facts)
    assert (problems == []) is matches, problems
