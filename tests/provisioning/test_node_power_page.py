"""The node page's power actions: an operator power-cycles a node through its Redfish BMC (a real
sushy-emulator); the request and the outcome are in the node's history; others cannot."""

import pytest

from portal.catalog.models import ServerSKU
from provisioning.models import Node, NodeEvent
from provisioning.states import NodeState, WipeMethod
from provisioning.tasks import node_power_task
from tests.factories import H100_SKU, make_node
from tests.provisioning.redfish_emulator import (  # noqa: F401 (a fixture)
    PASSWORD,
    redfish_emulator_fixture,
)


@pytest.fixture
def bmc_node(catalog, redfish_emulator, settings):
    """An ssh node whose BMC is the emulator's sys-page; the password comes from settings."""
    settings.NODE_DRIVER_OPTIONS = {**settings.NODE_DRIVER_OPTIONS,
                                    "ssh": {"redfish": {"password": PASSWORD}}}
    options = redfish_emulator.options("sys-page")
    del options["password"]
    return Node.objects.create(
        hostname="gpu-bmc-01", sku=ServerSKU.objects.get(slug=H100_SKU),
        management_address="127.0.0.1:1", driver="ssh", state=NodeState.READY,
        driver_options={"host_key": "SHA256:" + "A" * 43, "redfish": options},
        wipe_method=WipeMethod.FILES)


def test_an_operator_power_cycles_a_node_through_its_bmc(login, people, bmc_node, redfish_emulator):
    client = login(people.olga)
    page = client.get(f"/ops/nodes/{bmc_node.pk}/").content.decode()
    assert "Power cycle…" in page and "BMC, <code class=\"wrap\">Redfish trainyard@" in page

    response = client.post(f"/ops/nodes/{bmc_node.pk}/power/on/",
                           {"confirm": "yes", "note": "after the BIOS update"}, follow=True)
    assert "Power on of gpu-bmc-01 sent to its BMC" in response.content.decode()
    requested = NodeEvent.objects.get(node=bmc_node, transition="power_on_requested")
    assert requested.actor == people.olga and requested.note == "after the BIOS update"
    assert node_power_task(bmc_node.pk, people.olga.pk, "on")  # what the queued task runs
    assert redfish_emulator.power_state("sys-page") == "On"

    resets = redfish_emulator.resets_asked("sys-page")
    client.post(f"/ops/nodes/{bmc_node.pk}/power/cycle/", {"confirm": "yes"})
    assert node_power_task(bmc_node.pk, people.olga.pk, "cycle")
    assert redfish_emulator.resets_asked("sys-page") == resets + 1
    assert redfish_emulator.power_state("sys-page") == "On"
    done = NodeEvent.objects.get(node=bmc_node, transition="power_cycle")
    assert done.actor == people.olga and "done" in done.note
    history = client.get(f"/ops/nodes/{bmc_node.pk}/").content.decode()
    assert "Power cycle requested" in history and "Power cycle: done" in history


def test_a_bmc_that_refuses_is_recorded_with_its_reason(login, people, bmc_node, settings):
    settings.NODE_DRIVER_OPTIONS = {**settings.NODE_DRIVER_OPTIONS,
                                    "ssh": {"redfish": {"password": "pw-that-is-wrong-77"}}}
    assert node_power_task(bmc_node.pk, people.olga.pk, "off") is False
    failed = NodeEvent.objects.get(node=bmc_node, transition="power_off_failed")
    assert "refused user 'trainyard'" in failed.note and "(permanent)" in failed.note
    assert "pw-that-is-wrong-77" not in failed.note


def test_nothing_is_sent_without_the_confirmation(login, people, bmc_node):
    response = login(people.olga).post(f"/ops/nodes/{bmc_node.pk}/power/off/", follow=True)
    assert "confirm the power action first" in response.content.decode()
    assert not NodeEvent.objects.filter(node=bmc_node, transition__startswith="power_").exists()


def test_only_operators_switch_power(login, people, bmc_node):
    assert login(people.alice).post(f"/ops/nodes/{bmc_node.pk}/power/cycle/",
                                    {"confirm": "yes"}).status_code == 404
    assert login(people.sam).post(f"/ops/nodes/{bmc_node.pk}/power/cycle/",
                                  {"confirm": "yes"}).status_code == 403
    assert "Power cycle…" not in login(people.sam).get(f"/ops/nodes/{bmc_node.pk}/").content.decode()
    assert not NodeEvent.objects.filter(node=bmc_node, transition__startswith="power_").exists()


def test_a_node_without_a_bmc_has_no_power_actions(login, people, catalog, sim_dir):
    node = make_node(sku=H100_SKU, state_dir=sim_dir)
    client = login(people.olga)
    assert "Power cycle…" not in client.get(f"/ops/nodes/{node.pk}/").content.decode()
    response = client.post(f"/ops/nodes/{node.pk}/power/cycle/", {"confirm": "yes"}, follow=True)
    assert "has no BMC (Redfish or IPMI)" in response.content.decode()
    assert client.post(f"/ops/nodes/{node.pk}/power/dance/", {"confirm": "yes"}).status_code == 404


def test_an_operator_enrols_and_edits_a_redfish_bmc(login, people, catalog):
    client = login(people.olga)
    data = {"hostname": "gpu-rf-01", "sku": ServerSKU.objects.get(slug=H100_SKU).pk,
            "management_address": "10.9.0.1:22", "driver": "ssh", "wipe_method": "files",
            "host_key": "SHA256:" + "A" * 43, "bmc_kind": "redfish",
            "bmc_address": "https://10.9.1.1", "bmc_user": "trainyard", "bmc_system_id": "1"}
    bad = client.post("/ops/nodes/enrol/", {**data, "bmc_address": "https://bad_host"})
    assert bad.status_code == 400 and "neither an IP address nor a valid host name" in \
        bad.content.decode()
    client.post("/ops/nodes/enrol/", data)
    node = Node.objects.get(hostname="gpu-rf-01")
    assert node.driver_options["redfish"] == {"address": "https://10.9.1.1", "user": "trainyard",
                                              "system_id": "1"}
    assert "ipmi" not in node.driver_options
    assert "Redfish trainyard@https://10.9.1.1 (system 1)" in \
        client.get(f"/ops/nodes/{node.pk}/").content.decode()

    form = client.get(f"/ops/nodes/{node.pk}/edit/").content.decode()
    assert 'value="redfish" selected' in form and 'value="1"' in form
    node.driver_options = {**node.driver_options,
                           "redfish": {**node.driver_options["redfish"], "verify_tls": False}}
    node.save(update_fields=["driver_options"])
    client.post(f"/ops/nodes/{node.pk}/edit/", {
        **{k: v for k, v in data.items() if k not in ("hostname", "sku", "driver")},
        "bmc_system_id": "2", "fabric_group": "", "fabric_address": "", "nvme_devices": "",
        "login_user": "", "notes": ""})
    node.refresh_from_db()
    assert node.driver_options["redfish"] == {"address": "https://10.9.1.1", "user": "trainyard",
                                              "system_id": "2", "verify_tls": False}
