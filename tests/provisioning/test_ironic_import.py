"""Inventory from the engine: Ironic nodes of a resource class imported as nodes of a SKU, against
the real standalone Ironic. Facts that do not match the SKU are listed and the node is not
imported; an import is audited and idempotent."""

import uuid
from io import StringIO

import pytest
from django.core.exceptions import PermissionDenied
from django.core.management import call_command

from portal.catalog.models import ServerSKU
from provisioning.inventory.engine_import import hardware_mismatches, import_ironic_nodes
from provisioning.models import Node
from provisioning.states import NodeState
from tests.factories import H100_SKU, staff


@pytest.fixture
def engine_options(ironic_admin, settings):
    user, password = ironic_admin.server.htpasswd
    settings.NODE_DRIVER_OPTIONS = {**settings.NODE_DRIVER_OPTIONS, "ironic": {
        "ironic": {"url": ironic_admin.server.url, "auth": "http_basic", "username": user,
                   "password": password, "timeout_s": 10}}}


def _facts(sku, **changes):
    return {"gpu_count": sku.gpu_count, "gpu_model": f"NVIDIA {sku.gpu.name}",
            "memory_mb": sku.ram_gb * 1024, "cpus": sku.cpu_cores, **changes}


@pytest.mark.django_db
def test_matching_nodes_are_imported_and_mismatches_listed(catalog, ironic_admin,
                                                           engine_options):
    sku = ServerSKU.objects.select_related("gpu").get(slug=H100_SKU)
    rc = f"gpu-{uuid.uuid4().hex[:8]}"
    good = ironic_admin.enrol(f"h100-{rc}-01", resource_class=rc,
                              properties=_facts(sku, nvme_devices=["/dev/nvme0n1"]))
    ironic_admin.patch(good["uuid"], {"op": "add", "path": "/extra/address", "value": "10.0.0.21"})
    short = ironic_admin.enrol(f"h100-{rc}-02", resource_class=rc,
                               properties=_facts(sku, gpu_count=4, memory_mb=64 * 1024))
    bare = ironic_admin.enrol(f"h100-{rc}-03", resource_class=rc)
    ironic_admin.enrol(f"other-{rc}", resource_class=rc + "-x", properties=_facts(sku))

    out = StringIO()
    operator = staff("operator", username=f"op-{rc}")
    call_command("import_ironic_nodes", sku=H100_SKU, resource_class=rc, by=operator.username,
                 stdout=out)
    text = out.getvalue()

    node = Node.objects.get(hostname=f"h100-{rc}-01")
    assert node.driver == "ironic" and node.state == NodeState.ENROLLED
    assert node.driver_options == {"ironic": {"node": good["uuid"]}}
    assert node.management_address == "10.0.0.21" and node.nvme_devices == ["/dev/nvme0n1"]
    assert node.events.get(transition="enrol").actor == operator
    assert not Node.objects.filter(hostname__in=[f"h100-{rc}-02", f"h100-{rc}-03",
                                                 f"other-{rc}"]).exists()
    assert f"imported          h100-{rc}-01 ({good['uuid']})" in text
    assert f"mismatch          h100-{rc}-02 ({short['uuid']})" in text
    assert "4 GPUs, the SKU has 8" in text and "69 GB of memory, the SKU has" in text
    assert f"mismatch          h100-{rc}-03 ({bare['uuid']})" in text
    assert "GPU count not reported (properties.gpu_count)" in text
    assert "3 node(s) of resource class" in text and "1 imported, 2 mismatch" in text

    # Again: nothing doubles.
    again = import_ironic_nodes(by=operator, sku=sku, resource_class=rc)
    assert [line.outcome for line in again] == ["already enrolled", "mismatch", "mismatch"]
    assert Node.objects.filter(hostname=f"h100-{rc}-01").count() == 1


@pytest.mark.django_db
def test_a_node_without_an_address_is_refused_and_a_dry_run_enrols_nothing(catalog, ironic_admin,
                                                                           engine_options):
    sku = ServerSKU.objects.select_related("gpu").get(slug=H100_SKU)
    rc = f"gpu-{uuid.uuid4().hex[:8]}"
    ironic_admin.enrol(f"h100-{rc}-01", resource_class=rc, properties=_facts(sku))
    addressed = ironic_admin.enrol(f"h100-{rc}-02", resource_class=rc, properties=_facts(sku))
    ironic_admin.patch(addressed["uuid"], {"op": "add", "path": "/extra/address",
                                           "value": "10.0.0.22"})
    lines = import_ironic_nodes(by=staff("operator"), sku=sku, resource_class=rc, dry_run=True)
    assert [(line.outcome, line.problems[:1]) for line in lines] == [
        ("refused", ("no extra.address in Ironic: the address the installed system answers "
                     "SSH on",)),
        ("would import", ())]
    assert not Node.objects.filter(hostname__startswith=f"h100-{rc}").exists()
    with pytest.raises(PermissionDenied):
        import_ironic_nodes(by=staff("approver"), sku=sku, resource_class=rc)


@pytest.mark.django_db
def test_hardware_facts_are_compared_with_the_sku(catalog):
    sku = ServerSKU.objects.select_related("gpu").get(slug=H100_SKU)
    assert hardware_mismatches(sku, _facts(sku)) == []
    assert hardware_mismatches(sku, _facts(sku, gpu_model="NVIDIA A100-SXM4-80GB")) == [
        f"GPU model 'NVIDIA A100-SXM4-80GB', the SKU has {sku.gpu.name}"]
    assert hardware_mismatches(sku, _facts(sku, cpus=sku.cpu_cores - 1)) == [
        f"{sku.cpu_cores - 1} CPU cores, the SKU has {sku.cpu_cores}"]
    assert hardware_mismatches(sku, _facts(sku, nvme_devices="/dev/nvme0n1")) == [
        "properties.nvme_devices is not a list of device paths"]
