"""The Ironic driver against a real standalone Ironic (tests/engines/ironic.py): fake-hardware
nodes go through Ironic's own state machine; the installed system is the sshd test host.
Failures come from the engine itself: a conductor killed mid-deploy ('deploy failed'), a cleaning
runbook whose step fails in the conductor ('clean failed'), maintenance, a paused process."""

import threading
import time

import pytest
import yaml

from provisioning.drivers.base import DriverError, ExecutionStopped, Fence
from provisioning.drivers.ssh import _parse_pins
from tests.engines.conftest_ironic import (
    TEST_IMAGE,
    FirstBoot,
    deploy_steps_run,
    stored_configdrive,
)
from tests.provisioning.sshd import free_port


def collect():
    lines: list[str] = []
    return lines, lines.append


def test_deploy_goes_available_deploying_active_with_the_configdrive(ironic_admin,
                                                                       ironic_driver_for,
                                                                       installed_host):
    node = ironic_admin.enrol()
    driver = ironic_driver_for(node["uuid"], fence=Fence(3), test_host=False)
    lines, on_line = collect()
    facts = driver.deploy_os(image=TEST_IMAGE, on_line=on_line)

    assert facts.installed is True and facts.image == TEST_IMAGE
    assert any(line.startswith("ironic: deploying → active") for line in lines), lines
    after = ironic_admin.node(node["uuid"])
    assert after["provision_state"] == "active"
    info = after["instance_info"]
    assert info["image_source"] == "http://images.invalid/ubuntu-24.04.qcow2"
    assert info["image_os_hash_algo"] == "sha256" and info["image_os_hash_value"] == "ab" * 32
    assert info["configdrive"] == "******"  # Ironic hides it from its API
    assert after["extra"]["trainyard_fence"] == 3

    # What the engine received: Trainyard's cloud-init with the management key and the new
    # host key, whose public half is what the pipeline pins (never trust on first use).
    drive = stored_configdrive(ironic_admin.server, node["uuid"])
    config = yaml.safe_load(drive["user_data"])
    assert drive["user_data"].startswith("#cloud-config\n")
    assert config["hostname"] == "ironic-test-node" and config["ssh_pwauth"] is False
    (user,) = config["users"]
    assert user["name"] == installed_host.user
    assert user["ssh_authorized_keys"][0].split()[1] == installed_host.client_public_key.split()[1]
    (host_key,) = facts.host_keys
    assert config["ssh_keys"]["ed25519_public"] == host_key
    assert _parse_pins(host_key)[0][0] == "ssh-ed25519"
    assert after["extra"]["trainyard_deploy"]["host_key"] == host_key


def test_the_pinned_host_key_is_the_one_the_installed_system_presents(ironic_admin,
                                                                      ironic_driver_for,
                                                                      installed_host, tmp_path):
    node = ironic_admin.enrol()
    address = f"127.0.0.1:{free_port()}"
    boot = FirstBoot(ironic_admin.server, node["uuid"], tmp_path / "first-boot",
                     int(address.split(":")[1]))
    boot.start()
    try:
        facts = ironic_driver_for(node["uuid"], fence=Fence(1), test_host=False, address=address,
                                  host_key=None).deploy_os(image=TEST_IMAGE, on_line=print)
        boot.join(60)
        assert boot.error is None and boot.host is not None, boot.error
        (pin,) = facts.host_keys
        lines, on_line = collect()
        pinned = ironic_driver_for(node["uuid"], fence=Fence(1), test_host=False,
                                   address=address, host_key=pin)
        assert pinned.run("echo first login\n", name="configure", on_line=on_line).ok
        assert lines == ["first login"]
        # Any other key (the image's own, another machine's) is refused before a credential goes.
        with pytest.raises(DriverError) as info:
            ironic_driver_for(node["uuid"], fence=Fence(1), address=address,
                              host_key=installed_host.host_public_key).run(
                "echo hi\n", name="x", on_line=print)
        assert info.value.permanent is True and "HOST KEY MISMATCH" in str(info.value)
    finally:
        boot.stop()


def test_on_a_declared_test_host_the_enrolled_key_stands_and_ssh_runs(ironic_admin,
                                                                       ironic_driver_for):
    node = ironic_admin.enrol()
    driver = ironic_driver_for(node["uuid"], fence=Fence(1))
    facts = driver.deploy_os(image=TEST_IMAGE, on_line=print)
    assert facts.installed and facts.host_keys == ()
    lines, on_line = collect()
    assert driver.run("echo configured on $(hostname)\n", name="configure", on_line=on_line).ok
    assert lines and lines[0].startswith("configured on ")
    report = driver.health()  # over SSH too: the test host has no NVIDIA driver
    assert report.gpu_count == 0 and "nvidia-smi" in report.raw


def test_release_undeploys_and_cleans_back_to_available(ironic_admin, ironic_driver_for):
    node = ironic_admin.enrol()
    ironic_driver_for(node["uuid"], fence=Fence(1)).deploy_os(image=TEST_IMAGE, on_line=print)
    lines, on_line = collect()
    driver = ironic_driver_for(node["uuid"], fence=Fence(2), test_host=False)
    assert driver.release(erase=True, on_line=on_line) is True
    after = ironic_admin.node(node["uuid"])
    assert after["provision_state"] == "available" and not after["maintenance"]
    assert "configdrive" not in after["instance_info"]
    assert "trainyard_deploy" not in after["extra"] and after["extra"]["trainyard_fence"] == 2
    seen = " ".join(lines)
    assert "deleting" in seen and "cleaning" in seen and "available" in seen
    # Released twice (a redelivered task): nothing to undo, still clean.
    assert ironic_driver_for(node["uuid"], fence=Fence(2), test_host=False).release(
        erase=True, on_line=print) is True
    # A declared test host: Ironic cleaned, but nothing real was erased on the stand-in host.
    assert ironic_driver_for(node["uuid"], fence=Fence(2)).release(erase=True,
                                                                   on_line=print) is False


def test_a_failing_clean_is_permanent_with_ironics_message(ironic_admin, ironic_driver_for):
    ironic_admin.runbook("CUSTOM_BROKEN_BIOS", [{
        "interface": "bios", "step": "apply_configuration", "order": 1,
        "args": {"settings": [{"no_name": "x"}]}}])  # the BIOS step fails in the conductor
    node = ironic_admin.enrol()
    driver = ironic_driver_for(node["uuid"], fence=Fence(1))
    driver.deploy_os(image=TEST_IMAGE, on_line=print)
    ironic_admin.patch(node["uuid"], {"op": "add", "path": "/driver_info/cleaning_runbook",
                                      "value": "CUSTOM_BROKEN_BIOS"})
    with pytest.raises(DriverError) as info:
        ironic_driver_for(node["uuid"], fence=Fence(2)).release(erase=True, on_line=print)
    assert info.value.permanent is True
    assert "clean failed" in str(info.value) and "apply_configuration" in str(info.value)
    after = ironic_admin.node(node["uuid"])
    assert after["provision_state"] == "clean failed" and after["maintenance"] is True
    # Asked again (a retry), it says the same without touching the node.
    with pytest.raises(DriverError) as again:
        ironic_driver_for(node["uuid"], fence=Fence(3)).release(erase=True, on_line=print)
    assert again.value.permanent is True and "clean failed" in str(again.value)


def test_a_node_in_maintenance_is_not_deployed(ironic_admin, ironic_driver_for):
    node = ironic_admin.enrol()
    ironic_admin.maintenance(node["uuid"], "PSU 2 failed")
    with pytest.raises(DriverError) as info:
        ironic_driver_for(node["uuid"], fence=Fence(1)).deploy_os(image=TEST_IMAGE, on_line=print)
    assert info.value.permanent is True and "PSU 2 failed" in str(info.value)
    assert ironic_admin.node(node["uuid"])["provision_state"] == "available"


def _wait_for(predicate, timeout=30):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.1)
    raise AssertionError("condition not met in time")


def test_engine_down_mid_deploy_is_transient_and_a_crashed_deploy_fails_permanently(
        ironic_admin, ironic_driver_for):
    node = ironic_admin.enrol()
    ironic_admin.server.deploy_delay = "3"  # a deploy long enough to crash in
    ironic_admin.server.write_config()
    ironic_admin.server.restart()
    try:
        driver = ironic_driver_for(node["uuid"], fence=Fence(1))
        outcome: dict = {}
        thread = threading.Thread(target=lambda: _into(outcome, driver.deploy_os,
                                                       image=TEST_IMAGE, on_line=print))
        thread.start()
        _wait_for(lambda: ironic_admin.node(node["uuid"])["provision_state"] == "deploying")
        ironic_admin.server.kill()  # the conductor dies mid-deploy
        thread.join(30)
        assert isinstance(outcome.get("error"), DriverError), outcome
        assert outcome["error"].permanent is False and "cannot reach Ironic" in str(outcome["error"])
        ironic_admin.server.start()
        # The retry finds Ironic's verdict: the restarted conductor could not resume the deploy.
        with pytest.raises(DriverError) as info:
            ironic_driver_for(node["uuid"], fence=Fence(1)).deploy_os(image=TEST_IMAGE,
                                                                     on_line=print)
        assert info.value.permanent is True
        assert "deploy failed" in str(info.value) and "can't be resumed" in str(info.value)
    finally:
        ironic_admin.server.deploy_delay = "1"
        ironic_admin.server.write_config()
        ironic_admin.server.restart()
    # A newer claim (staff retry) deploys again from 'deploy failed'.
    facts = ironic_driver_for(node["uuid"], fence=Fence(2)).deploy_os(image=TEST_IMAGE,
                                                                      on_line=print)
    assert facts.installed and ironic_admin.node(node["uuid"])["provision_state"] == "active"


def _into(outcome: dict, call, **kwargs):
    try:
        outcome["result"] = call(**kwargs)
    except DriverError as exc:
        outcome["error"] = exc


def test_a_hung_api_is_transient_and_the_retry_follows_the_same_deploy(ironic_admin,
                                                                      ironic_driver_for):
    node = ironic_admin.enrol()
    driver = ironic_driver_for(node["uuid"], fence=Fence(1), ironic={"timeout_s": 1})
    outcome: dict = {}
    thread = threading.Thread(target=lambda: _into(outcome, driver.deploy_os, image=TEST_IMAGE,
                                                   on_line=print))
    thread.start()
    _wait_for(lambda: ironic_admin.node(node["uuid"])["provision_state"] == "deploying")
    ironic_admin.server.pause()
    try:
        thread.join(30)
    finally:
        ironic_admin.server.resume()
    assert isinstance(outcome.get("error"), DriverError), outcome
    assert outcome["error"].permanent is False
    lines, on_line = collect()
    facts = ironic_driver_for(node["uuid"], fence=Fence(1)).deploy_os(image=TEST_IMAGE,
                                                                     on_line=on_line)
    assert facts.installed
    assert any("following it instead of starting another" in line for line in lines), lines
    assert deploy_steps_run(ironic_admin.server, node["uuid"]) == 1


def _retried(call, attempts=100):
    """What the pipeline does with a transient error: try again a little later."""
    for _ in range(attempts):
        try:
            return call()
        except ExecutionStopped:
            raise
        except DriverError as exc:
            if exc.permanent:
                raise
            time.sleep(0.2)
    raise AssertionError("still transient")


def test_a_lost_claim_never_deploys_the_node_twice(ironic_admin, ironic_driver_for):
    node = ironic_admin.enrol()
    older = ironic_driver_for(node["uuid"], fence=Fence(5))
    outcome: dict = {}
    thread = threading.Thread(target=lambda: _into(outcome, older.deploy_os, image=TEST_IMAGE,
                                                   on_line=print))
    thread.start()
    _wait_for(lambda: ironic_admin.node(node["uuid"])["provision_state"] == "deploying")
    # The older worker lost its lease; the newer claim cannot record its token while Ironic's
    # conductor holds the node (transient), and then follows the deploy already made.
    newer_driver = ironic_driver_for(node["uuid"], fence=Fence(6), test_host=False)
    with pytest.raises(DriverError) as busy:
        newer_driver.deploy_os(image=TEST_IMAGE, on_line=print)
    assert busy.value.permanent is False and "busy" in str(busy.value)
    lines, on_line = collect()
    newer = _retried(lambda: newer_driver.deploy_os(image=TEST_IMAGE, on_line=on_line))
    thread.join(30)
    assert any("following it instead of starting another" in line for line in lines), lines
    assert ironic_admin.node(node["uuid"])["provision_state"] == "active"
    assert deploy_steps_run(ironic_admin.server, node["uuid"]) == 1
    recorded = ironic_admin.node(node["uuid"])["extra"]
    assert recorded["trainyard_fence"] == 6
    assert newer.host_keys == (recorded["trainyard_deploy"]["host_key"],)
    # The stale execution comes back: refused before it touches the node.
    before = ironic_admin.node(node["uuid"])
    for call in (lambda d: d.deploy_os(image=TEST_IMAGE, on_line=print),
                 lambda d: d.release(erase=True, on_line=print),
                 lambda d: d.power("off")):
        with pytest.raises(ExecutionStopped):
            call(ironic_driver_for(node["uuid"], fence=Fence(5)))
    after = ironic_admin.node(node["uuid"])
    assert after["provision_state"] == "active" and after["power_state"] == before["power_state"]
    assert after["extra"] == before["extra"]


def test_a_cancelled_claim_stops_waiting_and_leaves_the_deploy_to_the_next(ironic_admin,
                                                                         ironic_driver_for):
    node = ironic_admin.enrol()
    fence = Fence(7)
    outcome: dict = {}
    driver = ironic_driver_for(node["uuid"], fence=fence)
    thread = threading.Thread(target=lambda: _into(outcome, driver.deploy_os, image=TEST_IMAGE,
                                                   on_line=print))
    thread.start()
    _wait_for(lambda: ironic_admin.node(node["uuid"])["provision_state"] == "deploying")
    fence.cancel.set()
    thread.join(30)
    assert isinstance(outcome.get("error"), ExecutionStopped), outcome
    _retried(lambda: ironic_driver_for(node["uuid"], fence=Fence(8)).deploy_os(
        image=TEST_IMAGE, on_line=print))
    assert deploy_steps_run(ironic_admin.server, node["uuid"]) == 1


def test_a_release_while_ironic_still_deploys_waits_for_the_deploy(ironic_admin,
                                                                   ironic_driver_for):
    node = ironic_admin.enrol()
    outcome: dict = {}
    driver = ironic_driver_for(node["uuid"], fence=Fence(1))
    thread = threading.Thread(target=lambda: _into(outcome, driver.deploy_os, image=TEST_IMAGE,
                                                   on_line=print))
    thread.start()
    _wait_for(lambda: ironic_admin.node(node["uuid"])["provision_state"] == "deploying")
    with pytest.raises(DriverError) as info:
        ironic_driver_for(node["uuid"], fence=Fence(2)).release(erase=True, on_line=print)
    thread.join(30)
    # The conductor holds the node (its token cannot be recorded yet) or it is still deploying.
    assert info.value.permanent is False
    assert "busy with the node (409)" in str(info.value) or "still deploying" in str(info.value)
    assert _retried(lambda: ironic_driver_for(node["uuid"], fence=Fence(2), test_host=False)
                    .release(erase=True, on_line=print)) is True
    assert ironic_admin.node(node["uuid"])["provision_state"] == "available"


def test_power_goes_through_ironics_power_api(ironic_admin, ironic_driver_for):
    node = ironic_admin.enrol()
    driver = ironic_driver_for(node["uuid"], fence=Fence(1))
    driver.power("off")
    assert ironic_admin.node(node["uuid"])["power_state"] == "power off"
    driver.power("on")
    assert ironic_admin.node(node["uuid"])["power_state"] == "power on"
    driver.power("reboot")
    assert ironic_admin.node(node["uuid"])["power_state"] == "power on"
    assert driver.engine_state().provision_state == "available"


@pytest.mark.parametrize("change, permanent, message", [
    ({"ironic": {"url": f"http://127.0.0.1:{free_port()}"}}, False, "cannot reach Ironic"),
    ({"ironic": {"password": "wrong"}}, True, "refused our credentials"),
    ({"ironic": {"auth": "kerberos"}}, True, "unknown Ironic auth"),
    ({"node_name": "no-such-node"}, True, "no such node in Ironic"),
    ({"image": "debian-12"}, True, "no Ironic image for 'debian-12'"),
    ({"images": {TEST_IMAGE: {"url": "http://images.invalid/x.img"}}}, True, "no checksum"),
    ({"private_key": None}, True, "no SSH private key configured"),
])
def test_errors_say_whether_a_retry_can_help(ironic_admin, ironic_driver_for, change, permanent,
                                             message):
    node = ironic_admin.enrol()
    change = dict(change)
    image = change.pop("image", TEST_IMAGE)
    name = change.pop("node_name", node["uuid"])
    with pytest.raises(DriverError) as info:
        ironic_driver_for(name, fence=Fence(1), **change).deploy_os(image=image, on_line=print)
    assert info.value.permanent is permanent and message in str(info.value)
    assert ironic_admin.node(node["uuid"])["provision_state"] == "available"


def test_no_secret_reaches_a_log_line_or_an_error(ironic_admin, ironic_driver_for):
    node = ironic_admin.enrol()
    lines, on_line = collect()
    driver = ironic_driver_for(node["uuid"], fence=Fence(1), test_host=False)
    driver.deploy_os(image=TEST_IMAGE, on_line=on_line)
    private_host_key = yaml.safe_load(stored_configdrive(ironic_admin.server, node["uuid"])
                                      ["user_data"])["ssh_keys"]["ed25519_private"]
    text = "\n".join(lines) + repr(driver)
    assert "PRIVATE KEY" not in text and private_host_key not in text
    assert ironic_admin.server.htpasswd[1] not in text


def test_the_engines_word_on_a_machine_in_its_pool(ironic_admin, ironic_driver_for):
    """What attest, ready and stock acceptance read for an Ironic node (no system of ours on it)."""
    node = ironic_admin.enrol()
    driver = ironic_driver_for(node["uuid"], fence=Fence(1), test_host=False)
    available = driver.engine_check()
    assert available.available is True and available.text.startswith("ironic: available")
    driver.deploy_os(image=TEST_IMAGE, on_line=print)
    deployed = driver.engine_check()
    assert deployed.available is False and deployed.text.startswith("ironic: active")
    ironic_driver_for(node["uuid"], fence=Fence(2), test_host=False).release(erase=True, on_line=print)
    ironic_admin.maintenance(node["uuid"], "fan 3 loud")
    held = driver.engine_check()
    assert held.available is False and "maintenance: fan 3 loud" in held.text
    # A declared test host is a stand-in sshd host: checked over SSH like one.
    assert ironic_driver_for(node["uuid"], fence=Fence(3)).engine_check() is None
