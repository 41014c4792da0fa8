"""Drivers own their options: each declares what it reads of a node (OptionsSchema), and the enrol
form, its checks, the node page and the stack inputs ask that, never the driver's name. A driver
plugged in through NODE_DRIVERS gets the checks it declares without any other change."""

import ast
import re
from pathlib import Path

import pytest
from django.conf import settings

from provisioning.drivers import NodeDriver, OptionsSchema, driver_names, options_schema
from provisioning.drivers.simulated import SimulatedDriver
from provisioning.inventory import enrolment
from provisioning.power.bmc import BMC_KIND_CHOICES
from provisioning.stack.inputs import fabric_address
from tests.provisioning.sshd import generate_ed25519

REPO = Path(__file__).resolve().parents[2]
# The drivers' and the BMC kinds' names: only provisioning/drivers/ and provisioning/power/ test
# them; portal/settings.py is the registry that names them.
NAMES = frozenset({"ssh", "simulated", "ironic", "maas", "redfish", "ipmi",
                   *settings.NODE_DRIVERS, *(kind for kind, _ in BMC_KIND_CHOICES)})
# "simulated" is also a property every driver declares (NodeDriver.simulated), which reports and
# charts carry under that key: as a key it names the property, not a driver.
KEY_NAMES = NAMES - set(NodeDriver.__annotations__)
OWNERS = ("provisioning/drivers/", "provisioning/power/", "portal/settings.py")
TEMPLATE_NAME_TEST = re.compile(r"""(==|!=)\s*["'](%s)["']|["'](%s)["']\s*(==|!=)"""
                                % (("|".join(sorted(NAMES)),) * 2))


def _named(node, names) -> bool:
    if isinstance(node, ast.Constant):
        return node.value in names
    return isinstance(node, (ast.Tuple, ast.List, ast.Set)) and any(_named(e, names) for e in node.elts)


def name_tests(source: str) -> list[int]:
    """The lines of ``source`` that compare with a driver's or BMC kind's name, use one as a key
    (``options["ironic"]``, ``.get("ipmi")``, ``{"redfish": …}``, a loop over names) or pick
    nodes or a driver by one (``driver="ssh"``, ``{"driver": "simulated"}``)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Compare):
            hit = any(_named(side, NAMES) for side in (node.left, *node.comparators))
        elif isinstance(node, ast.Subscript):
            hit = _named(node.slice, KEY_NAMES)
        elif isinstance(node, ast.Call):
            hit = (isinstance(node.func, ast.Attribute) and node.func.attr in {"get", "pop", "setdefault"}
                   and bool(node.args) and _named(node.args[0], KEY_NAMES))
        elif isinstance(node, ast.Dict):
            hit = any(key is not None and (_named(key, KEY_NAMES) or (
                isinstance(key, ast.Constant) and key.value == "driver" and _named(value, NAMES)))
                for key, value in zip(node.keys, node.values, strict=True))
        elif isinstance(node, ast.keyword):
            hit = bool(node.arg) and node.arg.startswith("driver") and _named(node.value, NAMES)
        elif isinstance(node, (ast.For, ast.comprehension)):
            hit = _named(node.iter, KEY_NAMES)
        elif isinstance(node, ast.MatchValue):
            hit = _named(node.value, NAMES)
        else:
            continue
        if hit:
            found.append(node.iter.lineno if isinstance(node, ast.comprehension) else node.lineno)
    return sorted(set(found))


def _sources(pattern: str):
    for path in sorted(REPO.glob(pattern)):
        rel = path.relative_to(REPO).as_posix()
        if not rel.startswith(OWNERS) and "/migrations/" not in rel:
            yield rel, path.read_text(encoding="utf-8")


class BmcOnlyDriver(SimulatedDriver):
    """A plug-in: pins a host key and powers through a BMC; no customer login of its own."""

    name = "bmc-only"
    options_schema = OptionsSchema(host_key=True, bmc=True)


@pytest.fixture
def plugged(settings):
    settings.NODE_DRIVERS = {**settings.NODE_DRIVERS,
                             "bmc-only": f"{__name__}.BmcOnlyDriver"}


def test_no_driver_name_is_tested_outside_the_drivers():
    found = [f"{rel}:{line}" for pattern in ("portal/**/*.py", "provisioning/**/*.py")
             for rel, source in _sources(pattern) for line in name_tests(source)]
    found += [f"{rel}:{n}" for rel, source in _sources("templates/**/*.html")
              for n, line in enumerate(source.splitlines(), 1) if TEMPLATE_NAME_TEST.search(line)]
    assert found == []


PLANTED = """\
if node.driver == "ssh":
    pass
machine = options["ironic"]["node"]
bmc = options.get("redfish") or {}
options = {"ipmi": {"address": address, "user": user}}
nodes = Node.objects.filter(driver="simulated")
pick = kind in ("ipmi", "redfish")
for kind in ("ipmi", "redfish"):
    pass
defaults = {"driver": "maas"}
match node.driver:
    case "ironic":
        pass
bmcs = [options.get(kind) for kind in ["ipmi", "redfish"]]
"""


def test_the_scan_catches_each_way_of_testing_a_name():
    assert name_tests(PLANTED) == [1, 3, 4, 5, 6, 7, 8, 10, 12, 14]
    assert TEMPLATE_NAME_TEST.search('{% if node.driver == "ssh" %}')


def test_the_scan_leaves_the_registry_and_the_simulated_property_alone():
    clean = """\
report = {"simulated": bool(driver.simulated), "test_host": False}
shown = job.get("simulated")
choices = [(name, name) for name in driver_names()]
options = schema.dump(NodeOptions(engine_machine=uuid), base={})
"""
    assert name_tests(clean) == []


def test_every_configured_driver_declares_its_options():
    assert driver_names()
    for name in driver_names():
        assert isinstance(options_schema(name), OptionsSchema), name
    assert options_schema("ssh").host_key and not options_schema("simulated").host_key
    assert options_schema("no-such-driver") == OptionsSchema()


def test_a_plugged_in_driver_gets_the_checks_it_declares(plugged):
    def problems(driver, options):
        return set(enrolment.enrolment_problems(hostname="gpu-1", management_address="10.0.0.9",
                                                driver=driver, driver_options=options))

    assert problems("bmc-only", {"ipmi": "admin"}) == {"host_key", "bmc_address"}
    assert problems("bmc-only", {"host_key": generate_ed25519()[1]}) == set()
    assert problems("simulated", {"host_key": "nonsense", "ipmi": "admin"}) == set()  # reads neither


def test_a_driver_without_a_fabric_has_its_management_host_stand_in(plugged):
    class Node:
        fabric_address = ""
        driver_options = {}
        management_address = "10.0.0.9:22"

    simulated, plugged_in = Node(), Node()
    simulated.driver, plugged_in.driver = "simulated", "bmc-only"
    assert fabric_address(simulated) == "10.0.0.9"
    assert fabric_address(plugged_in) == ""
