"""A node's driver options read and written through its driver's schema: every driver's stored
options come back from parse/dump unchanged (same keys, same nesting), the typed values say what
Trainyard reads, and an edit through the form keeps what it does not show."""

import json

import pytest

from portal.catalog.models import ServerSKU
from provisioning.drivers import NodeOptions, driver_names, node_options, options_schema
from provisioning.models import Node
from provisioning.power.bmc import Bmc
from provisioning.states import NodeState
from tests.factories import H100_SKU
from tests.provisioning.sshd import generate_ed25519

KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl"
FINGERPRINT = "SHA256:" + "A" * 43

# (driver, stored options, what of them is the driver's own: the rest is rebuilt from NodeOptions)
STORED = [
    ("simulated", {}, {}),
    ("simulated", {"delay_scale": 0, "state_dir": "/var/sim", "fail": {"configure": {"transient": 2}},
                   "test_host": True}, {"delay_scale": 0, "state_dir": "/var/sim",
                                         "fail": {"configure": {"transient": 2}}}),
    ("ssh", {"host_key": KEY, "ipmi": {"address": "10.7.1.1", "user": "admin"}, "login_user": "trainer"},
     {}),
    ("ssh", {"host_key": [KEY, FINGERPRINT], "port": 2222, "test_host": True, "fabric_address": "10.50.0.1",
             "redfish": {"address": "https://10.9.1.1", "user": "trainyard", "system_id": "",
                         "verify_tls": False, "timeout_s": 10}}, {"port": 2222}),
    ("ssh", {"host_key": KEY, "test_host": False,
             "ipmi": {"address": "[fd00::5]:623", "user": "admin", "interface": "lan"}}, {}),
    ("ssh", {"host_key": KEY, "ipmi": {"interface": "lanplus"}}, {}),  # a BMC not named yet
    ("ironic", {"ironic": {"node": "0b1e4c0e-93b6-4c57-9a0a-6c0f2b1c2d3e"}}, {}),
    ("ironic", {"ironic": {"node": "gpu-07", "api_version": "1.78"}, "host_key": KEY,
                "login_user": "student", "test_host": True}, {"ironic": {"api_version": "1.78"}}),
    ("maas", {"system_id": "aa1111"}, {}),
    ("maas", {"system_id": "aa1111", "tags": ["h100"], "distro_series": "ubuntu/noble", "host_key": KEY},
     {"tags": ["h100"], "distro_series": "ubuntu/noble"}),
]


def test_every_configured_driver_has_stored_options_here():
    assert set(driver_names()) <= {driver for driver, _, _ in STORED}


@pytest.mark.parametrize(("driver", "stored", "own"), STORED)
def test_stored_options_come_back_unchanged(driver, stored, own):
    stored = json.loads(json.dumps(stored))  # as the JSON column gives them back
    schema = options_schema(driver)
    before = json.dumps(stored, sort_keys=True)
    options = schema.parse(stored)
    assert schema.dump(options, stored) == stored
    assert schema.dump(options, own) == stored  # the typed values alone rebuild Trainyard's part
    assert json.dumps(stored, sort_keys=True) == before  # parse and dump change nothing they read


@pytest.mark.parametrize(("driver", "stored", "own"), STORED)
def test_well_formed_stored_options_have_no_shape_problem(driver, stored, own):
    assert options_schema(driver).shape_problems(json.loads(json.dumps(stored))) == []


def test_a_null_option_is_unset_not_malformed():
    nulls = {"test_host": None, "host_key": None, "login_user": None, "fabric_address": None,
             "ironic": {"node": None}}
    schema = options_schema("ironic")
    assert schema.shape_problems(nulls) == []
    assert schema.parse(nulls) == NodeOptions()


@pytest.mark.parametrize(("driver", "options", "read", "words"), [
    ("ssh", {"test_host": "yes"}, "test_host",
     'driver_options.test_host is true or false, not the text "yes".'),
    ("simulated", {"test_host": 1}, "test_host",
     "driver_options.test_host is true or false, not the number 1."),
    ("ssh", {"host_key": [KEY, 7]}, "host_key",
     "driver_options.host_key is a key line or SHA256: fingerprint, or a list of them, not a list."),
    ("ssh", {"login_user": {"name": "x"}}, "login_user",
     "driver_options.login_user is an account name (text), not an object."),
    ("ssh", {"fabric_address": 1050001}, "fabric_address",
     "driver_options.fabric_address is an IP address (text), not the number 1050001."),
    ("ironic", {"ironic": {"node": ["gpu-07"]}}, "engine_machine",
     "driver_options.ironic.node is the engine's machine id (text), not a list."),
    ("maas", {"system_id": True}, "engine_machine",
     "driver_options.system_id is the engine's machine id (text), not true."),
    ("maas", ["system_id"], "engine_machine",
     'driver_options is an object of options, e.g. {"test_host": true}.'),
])
def test_a_value_parse_would_read_as_not_stored_is_a_shape_problem(driver, options, read, words):
    schema = options_schema(driver)
    assert schema.shape_problems(options) == [words]
    assert getattr(schema.parse(options), read) is None  # what the refusal protects against


def test_the_typed_values_say_what_trainyard_reads():
    ssh = options_schema("ssh").parse(STORED[3][1])
    assert ssh.host_key == (KEY, FINGERPRINT) and ssh.host_key_text == f"{KEY}\n{FINGERPRINT}"
    assert ssh.test_host is True and ssh.login_user is None and ssh.fabric_address == "10.50.0.1"
    assert ssh.bmc == Bmc(kind="redfish", address="https://10.9.1.1", user="trainyard", system_id="",
                          admin={"verify_tls": False, "timeout_s": 10})
    assert ssh.bmc.host_port == "10.9.1.1" and ssh.bmc.label == "Redfish trainyard@https://10.9.1.1"
    assert options_schema("ironic").parse(STORED[6][1]).engine_machine == STORED[6][1]["ironic"]["node"]
    assert options_schema("maas").parse(STORED[8][1]).engine_machine == "aa1111"
    assert options_schema("ssh").parse({"system_id": "aa1111"}).engine_machine is None  # not its field


def test_an_engine_machine_is_stored_where_its_driver_keeps_it():
    machine = NodeOptions(engine_machine="m-1")
    assert options_schema("ironic").dump(machine, base={}) == {"ironic": {"node": "m-1"}}
    assert options_schema("maas").dump(machine, base={}) == {"system_id": "m-1"}
    assert options_schema("ironic").dump(NodeOptions(), base={"tags": []}) == {"tags": []}


def test_a_node_names_one_bmc_and_power_prefers_redfish():
    both = {"ipmi": {"address": "10.0.0.5", "user": "a"}, "redfish": {"address": "10.0.0.6", "user": "b"}}
    schema = options_schema("ssh")
    assert schema.parse(both).bmc.kind == "redfish"
    assert schema.parse({**both, "redfish": {"password": "from settings"}}).bmc.kind == "ipmi"
    assert schema.dump(schema.parse(both), both) == {"redfish": {"address": "10.0.0.6", "user": "b"}}


def test_the_settings_password_stays_out_of_repr():
    merged = {"redfish": {"address": "10.0.0.6", "user": "b", "password": "s3cret"}}
    assert "s3cret" not in repr(options_schema("ssh").parse(merged))


@pytest.mark.django_db
def test_an_edit_that_changes_nothing_keeps_the_stored_options(login, people, catalog):
    stored = {"host_key": generate_ed25519()[1], "port": 2222, "login_user": "trainer",
              "redfish": {"address": "https://10.9.1.1", "user": "trainyard", "system_id": "1",
                          "verify_tls": False, "settle_timeout_s": 60}}
    node = Node.objects.create(hostname="gpu-opt-1", sku=ServerSKU.objects.get(slug=H100_SKU),
                               management_address="10.9.0.1:22", driver="ssh", state=NodeState.READY,
                               wipe_method="files", driver_options=stored)
    response = login(people.olga).post(f"/ops/nodes/{node.pk}/edit/", {
        "management_address": "10.9.0.1:22", "fabric_group": "", "fabric_address": "",
        "nvme_devices": "", "wipe_method": "files", "host_key": stored["host_key"],
        "login_user": "trainer", "bmc_kind": "redfish", "bmc_address": "https://10.9.1.1",
        "bmc_user": "trainyard", "bmc_system_id": "1", "notes": "rack 3"})
    assert response.status_code == 302
    node.refresh_from_db()
    assert node.driver_options == stored and node.notes == "rack 3"


@pytest.mark.django_db
def test_an_edit_keeps_what_the_driver_does_not_take_from_the_form(login, people, catalog):
    """An Ironic node's host key is pinned by its install, not at enrolment: an edit keeps it."""
    stored = {"ironic": {"node": "gpu-07"}, "host_key": KEY}
    node = Node.objects.create(hostname="gpu-opt-2", sku=ServerSKU.objects.get(slug=H100_SKU),
                               management_address="10.9.0.2:22", driver="ironic", state=NodeState.READY,
                               wipe_method="files", driver_options=stored)
    response = login(people.olga).post(f"/ops/nodes/{node.pk}/edit/", {
        "management_address": "10.9.0.2:22", "fabric_group": "", "fabric_address": "",
        "nvme_devices": "", "wipe_method": "files", "host_key": "", "login_user": "student",
        "test_host": "on", "notes": ""})
    assert response.status_code == 302
    node.refresh_from_db()
    assert node.driver_options == {**stored, "login_user": "student", "test_host": True}
    assert node_options(node).engine_machine == "gpu-07"


@pytest.mark.parametrize(("driver_class", "options", "words"), [
    ("provisioning.drivers.maas.MaasDriver",
     {"url": "http://127.0.0.1:9/MAAS", "system_id": {"id": "4y3h7n"}},
     "driver_options.system_id is the engine's machine id (text), not an object."),
    ("provisioning.drivers.ironic.IronicDriver",
     {"ironic": {"url": "http://127.0.0.1:9", "node": ["gpu-07"]}},
     "driver_options.ironic.node is the engine's machine id (text), not a list."),
    ("provisioning.drivers.ironic.IronicDriver", {"ironic": "gpu-07"},
     'driver_options.ironic is an object holding "node", not the text "gpu-07".'),
])
def test_an_engine_driver_refuses_a_stored_machine_id_it_cannot_read_and_never_takes_the_hostnames(
        driver_class, options, words):
    """A malformed id reads as not stored, and without one an engine driver would act on the
    machine of the node's hostname: it stops before any call to the engine instead."""
    from django.utils.module_loading import import_string

    from provisioning.drivers import DriverError, NodeTarget

    driver = import_string(driver_class)(NodeTarget(hostname="gpu-07", address="10.20.0.7", gpu_count=8,
                                                    options={"api_key": "a:b:c", **options}))
    with pytest.raises(DriverError) as exc:
        driver.engine_check()  # nothing listens on the URL: an engine call would fail otherwise
    assert exc.value.permanent and str(exc.value) == f"gpu-07: {words}"
