"""Operators see how a node is reached, powered and cleaned, edit its enrolment facts (checked as
at enrolment, audited) and retire it; approvers and customers cannot."""

import pytest
from django.utils import timezone

from portal.catalog.models import ServerSKU
from provisioning.models import Node, NodeEvent
from provisioning.states import NodeState
from tests.factories import H100_SKU, submitted_order
from tests.provisioning.sshd import fingerprint_sha256, generate_ed25519

pytestmark = pytest.mark.django_db


@pytest.fixture
def ssh_node(catalog):
    _, host_key = generate_ed25519()
    return Node.objects.create(
        hostname="gpu-ssh-e1", sku=ServerSKU.objects.get(slug=H100_SKU),
        management_address="10.7.0.1:22", driver="ssh", state=NodeState.READY,
        nvme_devices=["/dev/nvme1n1"], wipe_method="discard",
        driver_options={"host_key": host_key, "ipmi": {"address": "10.7.1.1", "user": "admin"},
                        "login_user": "trainer"})


def _edit(client, node, **fields):
    options = node.driver_options
    data = {"management_address": node.management_address, "fabric_group": "", "fabric_address": "",
            "nvme_devices": " ".join(node.nvme_devices), "wipe_method": node.wipe_method,
            "host_key": options.get("host_key", ""), "login_user": options.get("login_user", ""),
            "bmc_address": options.get("ipmi", {}).get("address", ""),
            "bmc_user": options.get("ipmi", {}).get("user", ""), "notes": ""} | fields
    return client.post(f"/ops/nodes/{node.pk}/edit/", data)


def test_the_node_page_shows_how_the_node_is_reached_powered_and_cleaned(login, people, ssh_node):
    html = login(people.olga).get(f"/ops/nodes/{ssh_node.pk}/").content.decode()
    fingerprint = fingerprint_sha256(ssh_node.driver_options["host_key"])
    assert f"ED25519 {fingerprint}" in html
    assert "Discard the data devices (blkdiscard)" in html and "/dev/nvme1n1" in html
    assert "IPMI admin@10.7.1.1" in html and "<code>trainer</code>" in html
    assert "not recorded" in html  # no clean baseline yet
    assert f"/ops/nodes/{ssh_node.pk}/edit/" in html and "Retire from the fleet" in html


def test_the_node_page_names_options_stored_in_a_shape_trainyard_does_not_read(login, people, ssh_node):
    Node.objects.filter(pk=ssh_node.pk).update(  # stored before enrolment refused it
        driver_options={**ssh_node.driver_options, "test_host": "yes"})
    client = login(people.olga)
    html = client.get(f"/ops/nodes/{ssh_node.pk}/").content.decode()
    assert "not read" in html
    assert "driver_options.test_host is true or false, not the text &quot;yes&quot;." in html
    assert "Test host</dt>" not in html  # read as not stored: no test host
    assert _edit(client, ssh_node, test_host="on").status_code == 302  # the form stores it again
    ssh_node.refresh_from_db()
    assert ssh_node.driver_options["test_host"] is True
    assert "not read" not in client.get(f"/ops/nodes/{ssh_node.pk}/").content.decode()


def test_an_edit_that_would_drop_an_option_it_does_not_write_is_refused(login, people, ssh_node):
    Node.objects.filter(pk=ssh_node.pk).update(
        driver_options={**ssh_node.driver_options, "fabric_address": ["10.50.0.1"]})
    ssh_node.refresh_from_db()
    response = _edit(login(people.olga), ssh_node, notes="moved to rack 4")
    assert response.status_code == 400
    assert "driver_options.fabric_address is an IP address (text), not a list." in response.content.decode()
    ssh_node.refresh_from_db()
    assert ssh_node.driver_options["fabric_address"] == ["10.50.0.1"] and ssh_node.notes == ""


def test_an_operator_edits_a_node_and_the_change_is_audited(login, people, ssh_node):
    response = _edit(login(people.olga), ssh_node, management_address="10.7.0.9:2222",
                     nvme_devices="", wipe_method="files", login_user="", bmc_address="", bmc_user="",
                     test_host="on")
    assert response.status_code == 302
    ssh_node.refresh_from_db()
    assert ssh_node.management_address == "10.7.0.9:2222"
    assert (ssh_node.nvme_devices, ssh_node.wipe_method) == ([], "files")
    assert "ipmi" not in ssh_node.driver_options and "login_user" not in ssh_node.driver_options
    assert ssh_node.driver_options["test_host"] is True and ssh_node.driver_options["host_key"]
    event = NodeEvent.objects.get(node=ssh_node, transition="edit")
    assert event.actor == people.olga
    assert event.note == ("changed: management address, nvme devices, wipe method, driver options; "
                          "the clean baseline is recorded again at the next deploy")


@pytest.mark.parametrize("fields, error", [
    ({"management_address": "10.7.0.300"}, "not a valid IPv4 address"),
    ({"wipe_method": "files"}, "Data devices are recorded"),
    ({"nvme_devices": "", "wipe_method": "zero"}, "Record the node&#x27;s data devices"),
    ({"host_key": ""}, "needs its pinned host key"),
    ({"bmc_user": ""}, "Give both the BMC address and the BMC user"),
    ({"login_user": "Root Account"}, "A Linux account name"),
])
def test_a_bad_edit_is_an_inline_error_and_changes_nothing(login, people, ssh_node, fields, error):
    before = Node.objects.values().get(pk=ssh_node.pk)
    response = _edit(login(people.olga), ssh_node, **fields)
    assert response.status_code == 400 and error in response.content.decode()
    assert Node.objects.values().get(pk=ssh_node.pk) == before
    assert not NodeEvent.objects.filter(node=ssh_node, transition="edit").exists()


def test_a_node_serving_an_order_is_not_edited(login, people, ssh_node):
    order = submitted_order(people)
    Node.objects.filter(pk=ssh_node.pk).update(order=order, state=NodeState.RESERVED)
    ssh_node.refresh_from_db()
    response = _edit(login(people.olga), ssh_node, notes="x")
    assert response.status_code == 400 and "serves order" in response.content.decode()


def test_an_operator_retires_a_node_out_of_the_fleet(login, people, ssh_node):
    client = login(people.olga)
    response = client.post(f"/ops/nodes/{ssh_node.pk}/retire/", {"note": "sold"}, follow=True)
    assert "gpu-ssh-e1 is retired" in response.content.decode()
    ssh_node.refresh_from_db()
    assert ssh_node.state == NodeState.RETIRED
    assert NodeEvent.objects.get(node=ssh_node, transition="retire").note == "sold"
    assert "gpu-ssh-e1" not in client.get("/ops/nodes/").content.decode()
    assert "gpu-ssh-e1" in client.get("/ops/nodes/?state=retired").content.decode()


@pytest.mark.parametrize("who, status", [("sam", 403), ("alice", 404)])
def test_approvers_and_customers_cannot_edit_or_retire(login, people, ssh_node, who, status):
    """An approver is told the page is for operators; a customer learns nothing of it."""
    client = login(getattr(people, who))
    assert client.get(f"/ops/nodes/{ssh_node.pk}/edit/").status_code == status
    assert _edit(client, ssh_node, management_address="10.7.0.2").status_code == status
    assert client.post(f"/ops/nodes/{ssh_node.pk}/retire/").status_code == status
    ssh_node.refresh_from_db()
    assert (ssh_node.management_address, ssh_node.state) == ("10.7.0.1:22", NodeState.READY)


def test_a_node_whose_hand_back_failed_goes_back_to_stock_only_through_the_hand_back(
        login, people, ssh_node):
    """Maintenance, then "return to service", would record the last tenant's leftovers as the
    node's clean baseline: refused while the hand-back of the order is open."""
    order = submitted_order(people)
    for state in (NodeState.FAILED_ATTESTATION, NodeState.FAILED_WIPE):
        Node.objects.filter(pk=ssh_node.pk).update(order=order, state=state)
        response = login(people.olga).post(f"/ops/nodes/{ssh_node.pk}/enter_maintenance/",
                                           follow=True)
        assert "did not finish" in response.content.decode()
        assert Node.objects.get(pk=ssh_node.pk).state == state
        retire = login(people.olga).post(f"/ops/nodes/{ssh_node.pk}/retire/", follow=True)
        assert "serves order" in retire.content.decode()
        assert Node.objects.get(pk=ssh_node.pk).state == state


def test_an_operator_records_a_baseline_for_a_node_that_has_none(
        login, people, ssh_node, django_capture_on_commit_callbacks):
    client = login(people.olga)
    assert "Record clean baseline" in client.get(f"/ops/nodes/{ssh_node.pk}/").content.decode()
    with django_capture_on_commit_callbacks() as queued:
        response = client.post(f"/ops/nodes/{ssh_node.pk}/record_baseline/", {"note": "looked"},
                               follow=True)
    assert "its clean baseline" in response.content.decode() and len(queued) == 1
    Node.objects.filter(pk=ssh_node.pk).update(baseline=["user root"], baseline_at=timezone.now())
    again = client.post(f"/ops/nodes/{ssh_node.pk}/record_baseline/", follow=True)
    assert "has a clean baseline" in again.content.decode()
    assert login(people.sam).post(f"/ops/nodes/{ssh_node.pk}/record_baseline/").status_code == 403


def test_changing_the_customer_login_makes_the_baseline_moot(login, people, ssh_node):
    Node.objects.filter(pk=ssh_node.pk).update(baseline=["file /home/trainer/.bashrc"],
                                               baseline_at=timezone.now())
    ssh_node.refresh_from_db()
    _edit(login(people.olga), ssh_node, notes="rack 3")
    assert Node.objects.get(pk=ssh_node.pk).baseline_at is not None  # a note changes nothing
    _edit(login(people.olga), ssh_node, login_user="student")
    ssh_node.refresh_from_db()
    assert ssh_node.baseline_at is None and ssh_node.baseline == []
    assert "recorded again at the next deploy" in NodeEvent.objects.filter(
        node=ssh_node, transition="edit").last().note
