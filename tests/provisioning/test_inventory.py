"""Enrolment, maintenance and health checks of nodes."""

import threading

import pytest
from django.core.exceptions import PermissionDenied, ValidationError
from django.db import IntegrityError, connection, transaction

from portal.catalog.models import ServerSKU
from portal.catalog.selectors import sku_list
from portal.core.states import DomainError, TransitionNotAllowed
from provisioning.inventory.selectors import node_last_health
from provisioning.inventory.services import node_enrol, node_return_to_service, node_set_maintenance
from provisioning.models import HealthCheck, Node
from provisioning.monitoring.health import UNREACHABLE_TEXT, node_accept_if_healthy, node_health_check
from provisioning.tasks import node_accept_check_task
from tests.factories import H100_SKU, make_node, verified_login
from tests.pg import wait_until_blocked


def test_an_operator_enrols_a_node_into_stock(catalog, people, sim_dir):
    sku = ServerSKU.objects.get(slug=H100_SKU)
    node = node_enrol(by=people.olga, sku=sku, hostname="gpu-h100-01",
                      management_address="10.1.0.1", fabric_group="ib-a",
                      nvme_devices=["/dev/nvme0n1"], driver_options={"state_dir": str(sim_dir)})
    assert node.state == "enrolled" and sku_list().get(pk=sku.pk).stock == 0  # not stock until checked
    node_accept_if_healthy(node=node, by=people.olga)  # what the queued check task runs
    node.refresh_from_db()
    assert (node.state, node.driver) == ("ready", "simulated")
    assert [e.transition for e in node.events.order_by("at", "pk")] == ["enrol", "accept"]
    assert sku_list().get(pk=sku.pk).stock == 1
    with pytest.raises(DomainError, match="already enrolled"):
        node_enrol(by=people.olga, sku=sku, hostname="gpu-h100-01", management_address="x")
    with pytest.raises(DomainError, match="Unknown driver 'no-such-engine'"):
        node_enrol(by=people.olga, sku=sku, hostname="n2", management_address="x",
                   driver="no-such-engine")


def test_only_operators_change_inventory(catalog, people, sim_dir):
    sku = ServerSKU.objects.get(slug=H100_SKU)
    for user in (people.alice, people.sam):
        with pytest.raises(PermissionDenied):
            node_enrol(by=user, sku=sku, hostname="n1", management_address="10.0.0.9")


def test_maintenance_takes_a_node_out_of_stock_and_back(catalog, people, sim_dir):
    node = make_node(sku=H100_SKU, state_dir=sim_dir)
    node_set_maintenance(node=node, by=people.olga, note="replace a fan")
    assert node.state == "maintenance"
    assert sku_list().get(slug=H100_SKU).stock == 0
    node_return_to_service(node=node, by=people.olga)  # asks for the check, in a worker
    node_accept_check_task(node.pk, people.olga.pk)  # what the queued check runs
    node.refresh_from_db()
    assert node.state == "ready"
    reserved = make_node(sku=H100_SKU, state_dir=sim_dir, state="deploying")
    with pytest.raises(TransitionNotAllowed, match="Cannot enter maintenance node"):
        node_set_maintenance(node=reserved, by=people.olga)


def test_a_health_check_records_gpus_temperature_and_ecc(catalog, sim_dir):
    healthy = make_node(sku=H100_SKU, state_dir=sim_dir, state="active")
    check = node_health_check(node=healthy)
    assert (check.ok, check.gpu_count, check.expected_gpu_count, check.ecc_errors) == (
        True, 8, 8, 0)
    assert check.max_temperature_c is not None and check.problems == []
    sick = make_node(sku=H100_SKU, state_dir=sim_dir, state="active", gpu_count=7,
                     temperature_c=91, ecc_errors=3)
    check = node_health_check(node=sick)
    assert not check.ok
    assert check.problems == ["7 of 8 GPUs visible", "GPU temperature 93 °C (limit 85 °C)",
                              "3 uncorrected ECC error(s)"]
    gone = make_node(sku=H100_SKU, state_dir=sim_dir, state="active",
                     fail={"health": {"permanent": "host unreachable"}})
    check = node_health_check(node=gone)
    assert (check.ok, check.problems) == (False, [UNREACHABLE_TEXT])  # customers see this
    assert check.raw == "driver error: health: host unreachable"  # operators this
    assert node_last_health(gone) == check
    assert HealthCheck.objects.count() == 3


@pytest.mark.parametrize("options,where", [
    ({"host_key": "ssh-ed25519 AAAA", "private_key": "-----BEGIN OPENSSH PRIVATE KEY-----"},
     "private_key"),
    ({"ipmi": {"address": "10.9.0.1", "user": "admin", "password": "calvin"}}, "ipmi.password"),
])
def test_secrets_are_refused_in_plain_text_driver_options(catalog, people, options, where):
    # Rule 6: secrets are encrypted at rest; driver_options is a plain JSON column.
    sku = ServerSKU.objects.get(slug=H100_SKU)
    with pytest.raises(DomainError, match=where):
        node_enrol(by=people.olga, sku=sku, hostname="gpu-ssh-01", management_address="10.1.0.9",
                   driver="ssh", driver_options=options)
    assert not Node.objects.filter(hostname="gpu-ssh-01").exists()
    node = make_node(sku=H100_SKU, state_dir="/nonexistent")  # the admin's change form path
    node.driver_options = options
    with pytest.raises(ValidationError, match=where):
        node.full_clean()


# --- hostnames are unique regardless of case, also when two enrolments race ----------
def test_a_hostname_differing_only_in_case_is_refused(catalog, people, sim_dir):
    sku = ServerSKU.objects.get(slug=H100_SKU)
    node_enrol(by=people.olga, sku=sku, hostname="gpu-h100-07", management_address="10.1.0.7")
    with pytest.raises(DomainError, match="A node named GPU-H100-07 is already enrolled"):
        node_enrol(by=people.olga, sku=sku, hostname="GPU-H100-07", management_address="10.1.0.8")
    with pytest.raises(IntegrityError), transaction.atomic():  # the database says it too
        Node.objects.create(hostname="Gpu-H100-07", sku=sku, management_address="10.1.0.9")
    assert Node.objects.filter(hostname__iexact="gpu-h100-07").count() == 1


def test_two_enrolments_racing_for_one_hostname_one_gets_a_clear_message(
        require_postgres, transactional_db, catalog, people, sim_dir):
    """The other enrolment passed the form's check before this one committed: the database
    constraint decides, and the loser gets a DomainError, not a 500."""
    sku = ServerSKU.objects.get(slug=H100_SKU)
    inserted, commit = threading.Event(), threading.Event()
    backend: dict = {}
    result: dict = {}

    def first_enrolment():  # inserted, not yet committed
        try:
            with transaction.atomic():
                Node.objects.create(hostname="gpu-race-01", sku=sku, management_address="10.9.0.1")
                inserted.set()
                commit.wait(30)
        finally:
            connection.close()

    def second_enrolment():
        try:
            with connection.cursor() as cursor:
                cursor.execute("SELECT pg_backend_pid()")
                backend["pid"] = cursor.fetchone()[0]
            result["node"] = node_enrol(by=people.olga, sku=sku, hostname="GPU-RACE-01",
                                        management_address="10.9.0.2")
        except Exception as exc:
            result["error"] = exc
        finally:
            connection.close()

    first = threading.Thread(target=first_enrolment)
    first.start()
    assert inserted.wait(30)
    second = threading.Thread(target=second_enrolment)
    second.start()
    try:
        wait_until_blocked(lambda: backend.get("pid"), "the second enrolment")
    finally:
        commit.set()
        first.join(30)
        second.join(30)
    assert isinstance(result.get("error"), DomainError), result
    assert str(result["error"]).startswith("A node named GPU-RACE-01 is already enrolled")
    assert list(Node.objects.filter(hostname__iexact="gpu-race-01").values_list("hostname", flat=True)) == [
        "gpu-race-01"]


def test_a_node_is_enrolled_with_its_fabric_address(catalog, people, client):
    sku = ServerSKU.objects.get(slug=H100_SKU)
    verified_login(client, people.olga)
    response = client.post("/ops/nodes/enrol/", {
        "hostname": "gpu-h100-f1", "sku": sku.pk, "management_address": "192.168.5.1",
        "driver": "simulated", "fabric_address": "10.50.0.1", "ready": "on",
        "wipe_method": "files"})
    node = Node.objects.get(hostname="gpu-h100-f1")
    assert response.status_code == 302 and node.fabric_address == "10.50.0.1"
    bad = client.post("/ops/nodes/enrol/", {
        "hostname": "gpu-h100-f2", "sku": sku.pk, "management_address": "192.168.5.2",
        "driver": "simulated", "fabric_address": "not an address", "wipe_method": "files"})
    assert bad.status_code == 400 and not Node.objects.filter(hostname="gpu-h100-f2").exists()
    assert "Enter a valid IPv4 or IPv6 address" in bad.content.decode()
