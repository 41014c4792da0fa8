"""Enrolment validates hostname, management address, the ssh host key and the BMC; a node is
stock (ready) only after a reachability and health check through its driver passes."""

import pytest

from portal.catalog.models import ServerSKU
from portal.catalog.selectors import sku_list
from provisioning.inventory import enrolment
from provisioning.models import Node
from provisioning.states import NodeState
from provisioning.tasks import node_accept_check_task
from tests.factories import H100_SKU

ED25519 = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl"


@pytest.mark.parametrize("hostname", ["gpu-h100-a07", "rack1.gpu-01.dc.example", "a" * 63])
def test_rfc_1123_hostnames_pass(hostname):
    assert enrolment.hostname_problem(hostname) is None


@pytest.mark.parametrize("hostname", ["-gpu", "gpu-", "gpu_01", "gpu 01", "a" * 64, "gpü", "a..b", ""])
def test_other_hostnames_are_refused(hostname):
    assert enrolment.hostname_problem(hostname)


@pytest.mark.parametrize("address", ["10.0.0.7", "10.0.0.7:22", "gpu-01.dc.example:2222", "fd00::7",
                                     "[fd00::7]:22", "[::1]"])
def test_management_addresses_that_pass(address):
    assert enrolment.address_problem(address) is None


@pytest.mark.parametrize(("address", "text"), [
    ("10.0.0.300", "not a valid IPv4"), ("10.0.0.7:0", "from 1 to 65535"), ("10.0.0.7:99999", "1 to 65535"),
    ("host:ssh", "from 1 to 65535"), ("[fd00::7:22", "not host[:port]"), ("bad_host:22", "neither"),
    (":22", "not host[:port]"),
])
def test_management_addresses_that_are_refused(address, text):
    assert text in enrolment.address_problem(address)


def _post(client, **fields):
    sku = ServerSKU.objects.get(slug=H100_SKU)
    data = {"hostname": "gpu-h100-s1", "sku": sku.pk, "management_address": "10.9.0.1:22",
            "driver": "ssh", "host_key": ED25519, "bmc_address": "", "bmc_user": "",
            "wipe_method": "files"} | fields
    return client.post("/ops/nodes/enrol/", data)


def test_an_ssh_node_needs_a_readable_pinned_host_key(people, catalog, login):
    client = login(people.olga)
    response = _post(client, host_key="")
    assert response.status_code == 400 and "needs its pinned host key" in response.content.decode()
    response = _post(client, host_key="ssh-ed25519 not-base64!!")
    assert "Cannot read this host key" in response.content.decode()
    assert not Node.objects.exists()


def test_enrolment_asks_how_the_data_is_erased_and_checks_it_fits_the_devices(people, catalog,
                                                                              login):
    client = login(people.olga)
    response = _post(client, wipe_method="")
    assert response.status_code == 400
    assert "Choose how this node&#x27;s data is erased between tenants" in response.content.decode()
    response = _post(client, wipe_method="discard")
    assert "Record the node&#x27;s data devices for this wipe method" in response.content.decode()
    response = _post(client, wipe_method="files", nvme_devices="/dev/nvme1n1")
    assert "Data devices are recorded: choose how they are erased" in response.content.decode()
    assert not Node.objects.exists()
    response = _post(client, wipe_method="zero", nvme_devices="/dev/nvme1n1 /dev/nvme2n1")
    assert response.status_code == 302
    node = Node.objects.get()
    assert (node.wipe_method, node.nvme_devices) == ("zero", ["/dev/nvme1n1", "/dev/nvme2n1"])


def test_the_bmc_needs_address_and_user_together(people, catalog, login):
    response = _post(login(people.olga), bmc_address="10.9.1.1")
    assert "Give both the BMC address and the BMC user" in response.content.decode()
    assert not Node.objects.exists()


def test_a_valid_ssh_enrolment_stores_the_pin_and_bmc_and_waits_for_its_check(people, catalog, login,
                                                                              django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks() as queued:
        response = _post(login(people.olga), bmc_address="10.9.1.1:623", bmc_user="admin", ready="on")
    assert response.status_code == 302
    node = Node.objects.get(hostname="gpu-h100-s1")
    assert node.state == NodeState.ENROLLED and len(queued) == 1  # the acceptance check, after commit
    assert node.driver_options == {"host_key": ED25519, "ipmi": {"address": "10.9.1.1:623", "user": "admin"}}


def _enrolled(people, sim_dir, **options):
    from provisioning.inventory.services import node_enrol

    return node_enrol(by=people.olga, sku=ServerSKU.objects.get(slug=H100_SKU), hostname="gpu-h100-c1",
                      management_address="10.9.0.2", driver="simulated",
                      driver_options={"state_dir": str(sim_dir), "delay_scale": 0, **options})


def test_a_healthy_node_becomes_ready_after_its_check(people, catalog, sim_dir):
    node = _enrolled(people, sim_dir)
    assert sku_list().get(slug=H100_SKU).stock == 0
    assert node_accept_check_task(node.pk, people.olga.pk) is True
    node.refresh_from_db()
    assert node.state == NodeState.READY and sku_list().get(slug=H100_SKU).stock == 1
    assert node.events.order_by("-pk").first().note == "reachability and health check passed"


@pytest.mark.parametrize("options", [{"gpu_count": 6},
                                     {"fail": {"health": {"permanent": "no route to host"}}}])
def test_a_broken_node_stays_out_of_stock_and_out_of_approvals(people, catalog, sim_dir, options, login):
    node = _enrolled(people, sim_dir, **options)
    assert node_accept_check_task(node.pk, people.olga.pk) is False
    node.refresh_from_db()
    assert node.state == NodeState.ENROLLED and sku_list().get(slug=H100_SKU).stock == 0
    check = node.health_checks.get()
    assert check.problems and not check.ok
    page = login(people.olga).get(f"/ops/nodes/{node.pk}/").content.decode()
    assert "Check and accept into stock" in page
