"""Drivers own their options: each declares what it reads of a node (OptionsSchema), and the enrol
form, its checks, the node page and the stack inputs ask that, never the driver's name. A driver
plugged in through NODE_DRIVERS gets the checks it declares without any other change."""

import re
from pathlib import Path

import pytest

from provisioning.drivers import OptionsSchema, driver_names, options_schema
from provisioning.drivers.simulated import SimulatedDriver
from provisioning.inventory import enrolment
from provisioning.stack.inputs import fabric_address
from tests.provisioning.sshd import generate_ed25519

REPO = Path(__file__).resolve().parents[2]
NAME_TEST = re.compile(r"""(==|!=)\s*["'](ssh|simulated)["']|["'](ssh|simulated)["']\s*(==|!=)""")


class BmcOnlyDriver(SimulatedDriver):
    """A plug-in: pins a host key and powers through a BMC; no customer login of its own."""

    name = "bmc-only"
    options_schema = OptionsSchema(host_key=True, bmc=True)


@pytest.fixture
def plugged(settings):
    settings.NODE_DRIVERS = {**settings.NODE_DRIVERS,
                             "bmc-only": f"{__name__}.BmcOnlyDriver"}


def test_no_driver_name_is_tested_outside_the_drivers():
    sources = [p for p in [*REPO.glob("portal/**/*.py"), *REPO.glob("provisioning/**/*.py"),
                           *REPO.glob("templates/**/*.html")]
               if "provisioning/drivers/" not in p.as_posix()]
    found = [f"{p.relative_to(REPO)}:{n}" for p in sources
             for n, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1)
             if NAME_TEST.search(line)]
    assert found == []


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
