"""Every way into inventory applies the enrolment checks: the service (used by the API and
scripts), the admin's add and change forms; a node back from maintenance is stock only after
its reachability and health check through the driver passes."""

import json

import pytest

from portal.catalog.models import ServerSKU
from portal.core.states import DomainError
from provisioning.inventory.enrolment import EnrolmentRefused, enrolment_problems
from provisioning.inventory.services import (
    node_enrol,
    node_return_to_service,
    node_set_maintenance,
    node_update,
)
from provisioning.models import Node
from provisioning.states import NodeState
from provisioning.tasks import node_accept_check_task
from tests.factories import H100_SKU, make_node, verified_login

ED25519 = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl"


@pytest.mark.parametrize(("fields", "field", "text"), [
    ({"hostname": "gpu_01"}, "hostname", "not a valid hostname label"),
    ({"management_address": "10.0.0.300"}, "management_address", "not a valid IPv4"),
    ({"management_address": "10.0.0.7:99999"}, "management_address", "1 to 65535"),
    ({"driver": "ssh", "driver_options": {}}, "host_key", "needs its pinned host key"),
    ({"driver": "ssh", "driver_options": {"host_key": ED25519, "ipmi": {"address": "10.9.1.1"}}},
     "bmc_address", "Give both the BMC address and the BMC user"),
    ({"driver_options": {"test_host": "yes"}}, "driver_options",
     'driver_options.test_host is true or false, not the text "yes".'),
])
def test_the_service_refuses_what_the_enrolment_page_refuses(catalog, people, fields, field, text):
    sku = ServerSKU.objects.get(slug=H100_SKU)
    data = {"hostname": "gpu-h100-e1", "management_address": "10.9.0.1", "driver": "simulated"} | fields
    with pytest.raises(EnrolmentRefused) as exc:
        node_enrol(by=people.olga, sku=sku, **data)
    assert text in exc.value.problems[field]
    assert not Node.objects.exists()


def _admin_post(client, path, **fields):
    sku = ServerSKU.objects.get(slug=H100_SKU)
    data = {"hostname": "gpu-h100-a1", "sku": sku.pk, "management_address": "10.9.0.1",
            "driver": "ssh", "driver_options": json.dumps({"host_key": ED25519}), "fabric_group": "",
            "fabric_address": "", "nvme_devices": "[]", "wipe_method": "files", "notes": "",
            "events-TOTAL_FORMS": "0", "events-INITIAL_FORMS": "0"} | fields
    return client.post(path, data)


@pytest.fixture
def admin_client_of_olga(people, client):
    people.olga.is_superuser = True  # the admin site needs model permissions; operators have them
    people.olga.save()
    verified_login(client, people.olga)
    return client


@pytest.mark.parametrize(("fields", "text"), [
    ({"hostname": "-gpu"}, "not a valid hostname label"),
    ({"management_address": "bad_host:22"}, "neither an IP address nor a valid host name"),
    ({"driver_options": "{}"}, "needs its pinned host key"),
    ({"driver_options": '{"host_key": "ssh-ed25519 not-base64!!"}'}, "Cannot read this host key"),
    ({"driver_options": json.dumps({"host_key": ED25519, "test_host": "yes"})},
     "driver_options.test_host is true or false, not the text &quot;yes&quot;."),
])
def test_the_admin_add_form_refuses_a_bad_enrolment(catalog, admin_client_of_olga, fields, text):
    response = _admin_post(admin_client_of_olga, "/admin/provisioning/node/add/", **fields)
    assert response.status_code == 200 and text in response.content.decode()
    assert not Node.objects.exists()


def test_the_admin_adds_a_valid_node_enrolled_not_in_stock(catalog, admin_client_of_olga):
    response = _admin_post(admin_client_of_olga, "/admin/provisioning/node/add/")
    assert response.status_code == 302
    node = Node.objects.get(hostname="gpu-h100-a1")
    assert node.state == NodeState.ENROLLED and node.events.get().transition == "enrol"


def test_the_admin_change_form_checks_an_edited_address(catalog, sim_dir, admin_client_of_olga):
    node = make_node(sku=H100_SKU, state_dir=sim_dir, hostname="gpu-h100-c7")
    response = _admin_post(admin_client_of_olga, f"/admin/provisioning/node/{node.pk}/change/",
                           hostname="gpu-h100-c7", driver="simulated", driver_options="{}",
                           management_address="10.0.0.999")
    assert response.status_code == 200 and "not a valid IPv4" in response.content.decode()
    node.refresh_from_db()
    assert node.management_address != "10.0.0.999"


def test_an_edit_that_would_store_a_malformed_flag_is_refused_and_keeps_the_node(catalog, people, sim_dir):
    node = make_node(sku=H100_SKU, state_dir=sim_dir, hostname="gpu-h100-c8")
    before = dict(node.driver_options)
    with pytest.raises(EnrolmentRefused) as exc:
        node_update(node=node, by=people.olga, driver_options={**before, "test_host": "no"})
    assert exc.value.problems == {
        "driver_options": 'driver_options.test_host is true or false, not the text "no".'}
    node.refresh_from_db()
    assert node.driver_options == before and not node.events.filter(transition="edit").exists()


def test_back_from_maintenance_only_after_the_driver_check_passes(catalog, people, sim_dir,
                                                                  django_capture_on_commit_callbacks):
    healthy = make_node(sku=H100_SKU, state_dir=sim_dir)
    broken = make_node(sku=H100_SKU, state_dir=sim_dir, gpu_count=7)
    for node in (healthy, broken):
        node_set_maintenance(node=node, by=people.olga, note="fan")
        with django_capture_on_commit_callbacks() as queued:
            node_return_to_service(node=node, by=people.olga)
        node.refresh_from_db()
        assert node.state == NodeState.MAINTENANCE and len(queued) == 1  # a check, after commit
        node_accept_check_task(node.pk, people.olga.pk)  # what the queued check runs
        node.refresh_from_db()
    assert healthy.state == NodeState.READY
    assert healthy.events.last().note == "reachability and health check passed"
    assert broken.state == NodeState.MAINTENANCE
    assert "7 of 8 GPUs visible" in broken.health_checks.last().problems


def test_only_a_node_in_maintenance_is_returned_to_service(catalog, people, sim_dir):
    node = make_node(sku=H100_SKU, state_dir=sim_dir)
    with pytest.raises(DomainError, match="only a node in maintenance"):
        node_return_to_service(node=node, by=people.olga)


def test_seeded_demo_nodes_pass_the_enrolment_checks(catalog):
    """Their address must be one the admin's change form accepts (it was "sim://…": refused)."""
    from django.core.management import call_command

    call_command("seed_nodes", per_sku=1)
    node = Node.objects.filter(driver="simulated").first()
    assert enrolment_problems(hostname=node.hostname, management_address=node.management_address,
                              driver=node.driver, driver_options=node.driver_options) == {}
