"""Redfish power against a real sushy-emulator (fake systems, delayed power state, basic auth):
what Trainyard asks is read back from the emulator, past Trainyard's own client."""

import pytest

from provisioning.drivers.base import DriverError, Fence, NodeTarget
from provisioning.drivers.ssh import SshDriver
from provisioning.power.redfish import RedfishBmc, RedfishPower
from tests.provisioning.redfish_emulator import redfish_emulator_fixture  # noqa: F401


def _power(emulator, system_id, **overrides) -> RedfishPower:
    return RedfishPower(RedfishBmc.from_options(emulator.options(system_id, **overrides)),
                        where="gpu-test")


def test_power_on_off_and_cycle_are_seen_by_the_bmc(redfish_emulator):
    power = _power(redfish_emulator, "sys-power")
    assert redfish_emulator.power_state("sys-power") == "Off"

    assert power.power("on") == "on"  # returns once the delayed state has landed
    assert redfish_emulator.power_state("sys-power") == "On"
    assert power.status() == "on"

    assert power.power("off") == "off"
    assert redfish_emulator.power_state("sys-power") == "Off"

    resets = redfish_emulator.resets_asked("sys-power")
    assert power.power("on") == "on"
    assert power.power("cycle") == "on"  # the emulator goes Off at once, then On after a delay
    assert redfish_emulator.power_state("sys-power") == "On"
    assert redfish_emulator.resets_asked("sys-power") == resets + 2


def test_asking_for_the_state_it_is_in_sends_no_reset(redfish_emulator):
    power = _power(redfish_emulator, "sys-status")
    resets = redfish_emulator.resets_asked("sys-status")
    assert power.power("off") == "off"
    assert power.power("status") == "off"
    assert redfish_emulator.resets_asked("sys-status") == resets


def test_a_one_time_boot_override_reaches_the_bmc(redfish_emulator):
    power = _power(redfish_emulator, "sys-boot")
    power.boot_once("pxe")
    assert redfish_emulator.boot("sys-boot")["BootSourceOverrideTarget"] == "Pxe"
    assert power.boot_target() == "Pxe"
    power.boot_once("disk")
    assert redfish_emulator.boot("sys-boot")["BootSourceOverrideTarget"] == "Hdd"
    with pytest.raises(DriverError, match="unknown boot device 'usb'") as caught:
        power.boot_once("usb")
    assert caught.value.permanent


def test_wrong_credentials_are_permanent_and_say_what_to_check(redfish_emulator):
    power = _power(redfish_emulator, "sys-power", password="not-the-password")
    with pytest.raises(DriverError) as caught:
        power.power("on")
    assert caught.value.permanent
    assert "refused user 'trainyard' (HTTP 401)" in caught.value.message
    assert "REDFISH_PASSWORD_FILE" in caught.value.message
    assert "not-the-password" not in caught.value.message
    assert "not-the-password" not in repr(power) + repr(power.bmc)


def test_an_unknown_system_id_is_permanent_and_lists_the_ones_there(redfish_emulator):
    power = _power(redfish_emulator, "no-such-system")
    with pytest.raises(DriverError) as caught:
        power.power("cycle")
    assert caught.value.permanent
    assert "has no system 'no-such-system'" in caught.value.message
    assert "'sys-power'" in caught.value.message  # what the operator can pick instead


def test_a_bmc_that_does_not_answer_is_transient(redfish_emulator):
    down = redfish_emulator.url.rsplit(":", 1)[0] + ":1"  # nothing listens on port 1
    power = _power(redfish_emulator, "sys-power", address=down)
    with pytest.raises(DriverError) as caught:
        power.power("on")
    assert not caught.value.permanent
    assert "cannot reach the BMC" in caught.value.message


def test_options_without_a_password_are_refused_before_any_request():
    with pytest.raises(DriverError, match="REDFISH_PASSWORD_FILE") as caught:
        RedfishBmc.from_options({"address": "https://10.0.0.9", "user": "admin"})
    assert caught.value.permanent


def test_a_lost_claim_sends_nothing(redfish_emulator):
    fence = Fence(token=3)
    fence.cancel.set()
    power = RedfishPower(RedfishBmc.from_options(redfish_emulator.options("sys-status")),
                         where="gpu-test", fence=fence)
    resets = redfish_emulator.resets_asked("sys-status")
    with pytest.raises(DriverError, match="claim was lost"):
        power.power("on")
    assert redfish_emulator.resets_asked("sys-status") == resets


def test_the_ssh_driver_powers_a_hung_node_through_its_redfish_bmc(redfish_emulator):
    """No SSH server behind the address: the reboot goes to the BMC, not to the OS."""
    driver = SshDriver(NodeTarget(hostname="gpu-ssh", address="127.0.0.1:1", options={
        "host_key": "SHA256:" + "A" * 43, "redfish": redfish_emulator.options("sys-ssh")}))
    driver.power("on")
    assert redfish_emulator.power_state("sys-ssh") == "On"
    resets = redfish_emulator.resets_asked("sys-ssh")
    driver.power("reboot")
    assert redfish_emulator.resets_asked("sys-ssh") == resets + 1
    assert redfish_emulator.power_state("sys-ssh") == "On"


def test_a_bmc_answering_5xx_is_transient(httpserver):
    """A BMC whose service root answers but whose system fails (HTTP 503, as a busy BMC does)."""
    httpserver.expect_request("/redfish/v1/").respond_with_json({
        "@odata.id": "/redfish/v1/", "@odata.type": "#ServiceRoot.v1_5_0.ServiceRoot",
        "Id": "RootService", "Name": "Root Service", "RedfishVersion": "1.5.0",
        "UUID": "85775665-c110-4b85-8989-e6162170b3ec",
        "Systems": {"@odata.id": "/redfish/v1/Systems"}})
    httpserver.expect_request("/redfish/v1/Systems/1").respond_with_json(
        {"error": {"code": "Base.1.0.GeneralError", "message": "BMC busy, try later"}}, status=503)
    power = RedfishPower(RedfishBmc.from_options({
        "address": httpserver.url_for("/").rstrip("/"), "user": "trainyard", "password": "x",
        "system_id": "1", "timeout_s": 5}), where="gpu-test")
    with pytest.raises(DriverError) as caught:
        power.status()
    assert not caught.value.permanent
    assert "HTTP 503" in caught.value.message and "BMC busy, try later" in caught.value.message
