"""The maas driver against recorded MAAS exchanges on a real loopback HTTP server.

MAAS cannot run here (a snap); the exchanges replayed by ``tests/provisioning/maas_recorded.py``
take their shapes from MAAS's own API source, github.com/maas/maas commit
de2288e04a9ad6fee7dd8954f6502d754f2ef280: ``src/maasserver/api/machines.py`` (machine fields,
allocate/deploy/release forms), ``nodes.py`` (owner data, power), ``events.py`` (the events feed),
``examples/machines.json`` and ``examples/events.json`` (recorded answers), ``enum.py`` (statuses),
``exceptions.py`` and ``auth.py`` (error codes and texts). The tests check what the client sent:
the OAuth header, the form fields, the base64 user data.

``test_live_maas`` talks to a real MAAS when MAAS_URL and MAAS_API_KEY are set, and is skipped
otherwise (read only: it lists machines, and queries one's power if MAAS_TEST_SYSTEM_ID is set).
"""

import base64
import os
from urllib.parse import unquote

import pytest
import yaml

from provisioning.drivers.base import DriverError, ExecutionStopped, Fence, NodeTarget
from provisioning.drivers.maas import MaasDriver, distro_series_for
from provisioning.drivers.maas_api import MaasApi, MaasApiKey
from tests.provisioning.maas_recorded import BAD_KEY, RecordedMaas
from tests.provisioning.sshd import generate_ed25519

API_KEY = "cKeyAbc123:tKeyDef456:tSecretGhi789"
CLIENT_KEY, CLIENT_PUBLIC = generate_ed25519()


def _driver(url, *, fence=None, **options) -> MaasDriver:
    base = {"url": url, "api_key": API_KEY, "system_id": "4y3h7n", "user": "trainyard",
            "private_key": CLIENT_KEY, "poll_interval_s": 0.05, "deploy_timeout_s": 30,
            "release_timeout_s": 30, "power_timeout_s": 30, "wipe_method": "secure_erase",
            **options}
    return MaasDriver(NodeTarget(hostname="gpu-maas-01", address="10.20.0.31", gpu_count=8,
                                 options=base, fence=fence))


@pytest.fixture
def maas(httpserver):
    recorded = RecordedMaas(events_at={
        "Deploying": [("Node changed status", "From 'Allocated' to 'Deploying'", "INFO"),
                      ("PXE Request - installation", "", "INFO")],
        "Deployed": [("Node changed status", "From 'Deploying' to 'Deployed'", "INFO")],
        "Disk erasing": [("Node changed status", "From 'Releasing' to 'Disk erasing'", "INFO")],
        "Ready": [("Node changed status", "From 'Disk erasing' to 'Ready'", "INFO")],
    })
    recorded.url = recorded.serve(httpserver)
    return recorded


def test_allocate_deploy_and_poll_to_deployed(maas):
    lines = []
    driver = _driver(maas.url, fence=Fence(7), tags=["h100"])
    facts = driver.deploy_os(image="ubuntu-24.04-cuda-12.8", on_line=lines.append)

    assert facts.installed and len(facts.host_keys) == 1
    host_key = facts.host_keys[0]
    assert host_key.startswith("ssh-ed25519 ")
    assert maas.status == "Deployed"
    # MAAS's events streamed as progress, in order, each once
    progress = [line for line in lines if "Node changed status" in line or "PXE" in line]
    assert progress == ["MAAS: Node changed status: From 'Allocated' to 'Deploying'",
                        "MAAS: PXE Request - installation",
                        "MAAS: Node changed status: From 'Deploying' to 'Deployed'"]

    allocate, = maas.requests("allocate")
    assert allocate.method == "POST" and allocate.path == "/MAAS/api/2.0/machines/op-allocate"
    assert allocate.field("system_id") == ["4y3h7n"] and allocate.field("tags") == ["h100"]
    owner, = maas.requests("set_owner_data")
    assert owner.field("trainyard_fence") == ["7"] and owner.field("trainyard_host_key") == [host_key]
    deploy, = maas.requests("deploy")
    assert deploy.path == "/MAAS/api/2.0/machines/4y3h7n/op-deploy"
    assert deploy.field("distro_series") == ["ubuntu/24.04"]
    user_data = base64.b64decode(deploy.field("user_data")[0]).decode()
    assert user_data.startswith("#cloud-config\n")
    config = yaml.safe_load(user_data)
    assert config["hostname"] == "gpu-maas-01" and config["ssh_pwauth"] is False
    assert config["users"][0]["name"] == "trainyard"
    assert config["users"][0]["ssh_authorized_keys"] == [" ".join(CLIENT_PUBLIC.split()[:2])]
    assert config["ssh_keys"]["ed25519_public"] == host_key
    assert "OPENSSH PRIVATE KEY" in config["ssh_keys"]["ed25519_private"]
    assert (allocate.headers.get("Content-Type") or "").startswith("application/x-www-form-urlencoded")
    # the SSH delegate now pins the key the install was given
    assert driver.ssh.pins and driver.ssh.pins[0][0] == "ssh-ed25519"


def test_every_request_is_signed_oauth1_plaintext(maas):
    _driver(maas.url).deploy_os(image="ubuntu-22.04", on_line=lambda line: None)
    assert maas.seen
    for seen in maas.seen:
        header = seen.headers["Authorization"]
        assert header.startswith("OAuth ")
        params = dict(part.strip().split("=", 1) for part in header[len("OAuth "):].split(","))
        params = {k: unquote(v.strip('"')) for k, v in params.items()}
        assert params["oauth_signature_method"] == "PLAINTEXT"
        assert params["oauth_consumer_key"] == "cKeyAbc123"
        assert params["oauth_token"] == "tKeyDef456"
        assert params["oauth_signature"] == "&tSecretGhi789"  # empty consumer secret & token secret
        assert params["oauth_nonce"] and params["oauth_timestamp"].isdigit()


def test_a_failed_deployment_is_permanent_with_the_last_event(maas):
    maas.deploy_walk = ["Deploying", "Failed deployment"]
    maas.events_at["Failed deployment"] = [
        ("Node installation failure", "Installation failed (refer to the installation log for "
                                      "more information).", "ERROR"),
        ("Node changed status", "From 'Deploying' to 'Failed deployment'", "INFO")]
    with pytest.raises(DriverError) as caught:
        _driver(maas.url, fence=Fence(3)).deploy_os(image="ubuntu-24.04", on_line=lambda line: None)
    assert caught.value.permanent
    assert "deploy failed (Failed deployment)" in caught.value.message
    assert "Node installation failure: Installation failed (refer to the installation log" \
        in caught.value.message


def test_a_409_is_transient_and_the_retry_deploys_once(maas):
    maas.errors[("POST", "allocate")] = [(409, "No machine with system ID 4y3h7n available.")]
    driver = _driver(maas.url, fence=Fence(4))
    with pytest.raises(DriverError) as caught:
        driver.deploy_os(image="ubuntu-24.04", on_line=lambda line: None)
    assert not caught.value.permanent
    assert "HTTP 409: No machine with system ID 4y3h7n available." in caught.value.message
    assert maas.requests("deploy") == []
    # the pipeline retries the step (a new claim: a newer token)
    facts = _driver(maas.url, fence=Fence(5)).deploy_os(image="ubuntu-24.04",
                                                        on_line=lambda line: None)
    assert facts.installed and len(maas.requests("deploy")) == 1
    assert maas.owner_data["trainyard_fence"] == "5"


def test_a_refused_api_key_is_permanent_with_maas_words(maas):
    maas.errors[("GET", "machine")] = [(401, BAD_KEY)]
    with pytest.raises(DriverError) as caught:
        _driver(maas.url).deploy_os(image="ubuntu-24.04", on_line=lambda line: None)
    assert caught.value.permanent
    assert "HTTP 401: Authorization Error: Invalid API key." in caught.value.message
    assert "tSecretGhi789" not in caught.value.message


def test_an_unknown_system_id_is_permanent(maas):
    with pytest.raises(DriverError) as caught:
        _driver(maas.url, system_id="nosuch").deploy_os(image="ubuntu-24.04",
                                                         on_line=lambda line: None)
    assert caught.value.permanent and "No Machine matches the given query." in caught.value.message


def test_a_server_error_and_a_dead_region_are_transient(maas):
    maas.errors[("GET", "machine")] = [(503, "Unable to connect to the rack controller.")]
    with pytest.raises(DriverError) as caught:
        _driver(maas.url).power("on")
    assert not caught.value.permanent and "HTTP 503" in caught.value.message
    with pytest.raises(DriverError) as caught:
        _driver("http://127.0.0.1:1/MAAS").power("on")
    assert not caught.value.permanent and "cannot reach MAAS" in caught.value.message


@pytest.mark.parametrize(("wipe_method", "secure", "quick"), [
    ("secure_erase", "true", "false"), ("zero", "false", "false"),
    ("discard", "true", "true"), ("files", "false", "true")])
def test_release_erases_as_the_node_wipe_method_says(maas, wipe_method, secure, quick):
    maas.status, maas.owner_data = "Deployed", {"trainyard_fence": "7"}
    lines = []
    erased = _driver(maas.url, fence=Fence(7), wipe_method=wipe_method).release(
        erase=True, on_line=lines.append)
    assert erased is True and maas.status == "Ready"
    release, = maas.requests("release")
    assert release.path == "/MAAS/api/2.0/machines/4y3h7n/op-release"
    assert release.field("erase") == ["true"]
    assert release.field("secure_erase") == [secure] and release.field("quick_erase") == [quick]
    assert "MAAS: Node changed status: From 'Disk erasing' to 'Ready'" in lines


def test_a_failed_erase_is_permanent_with_the_last_event(maas):
    maas.status = "Deployed"
    maas.release_walk = ["Disk erasing", "Failed disk erasing"]
    maas.events_at["Failed disk erasing"] = [
        ("Failed to erase disks", "nvme0n1: secure erase failed", "ERROR")]
    with pytest.raises(DriverError) as caught:
        _driver(maas.url).release(erase=True, on_line=lambda line: None)
    assert caught.value.permanent
    assert "Failed to erase disks: nvme0n1: secure erase failed" in caught.value.message


def test_a_retried_release_follows_the_erase_under_way(maas):
    maas.status, maas._walk = "Disk erasing", ["Disk erasing", "Ready"]
    lines = []
    assert _driver(maas.url).release(erase=True, on_line=lines.append) is True
    assert maas.requests("release") == []
    assert "MAAS: Node changed status: From 'Disk erasing' to 'Ready'" in lines
    assert not any("Commissioning complete" in line for line in lines)  # only what is new


def test_a_released_machine_is_not_released_again(maas):
    assert _driver(maas.url).release(erase=True, on_line=lambda line: None) is True
    assert maas.requests("release") == []


def test_the_engines_word_is_the_machines_status(maas):
    """What attest, ready and stock acceptance read for a MAAS node: Ready is available."""
    driver = _driver(maas.url, fence=Fence(1))
    ready = driver.engine_check()
    assert ready.available is True and ready.text == "MAAS: 4y3h7n is Ready"
    driver.deploy_os(image="ubuntu-24.04-cuda-12.8", on_line=lambda line: None)
    deployed = driver.engine_check()
    assert deployed.available is False and deployed.text == "MAAS: 4y3h7n is Deployed"


def test_a_newer_execution_stops_an_older_one_and_deploys_never_overlap(maas):
    _, host_key = generate_ed25519()
    maas.status = "Deploying"
    maas.owner_data = {"trainyard_fence": "9", "trainyard_host_key": host_key}
    with pytest.raises(ExecutionStopped):
        _driver(maas.url, fence=Fence(8)).deploy_os(image="ubuntu-24.04", on_line=lambda line: None)
    # a newer claim adopts the deploy under way instead of starting a second one
    maas._walk = ["Deploying", "Deployed"]
    facts = _driver(maas.url, fence=Fence(10)).deploy_os(image="ubuntu-24.04",
                                                         on_line=lambda line: None)
    assert facts.host_keys == (host_key,)
    assert maas.requests("deploy") == [] and maas.owner_data["trainyard_fence"] == "10"


def test_power_goes_through_maas_and_waits_for_the_state(maas):
    maas.status, maas.power_state = "Deployed", "on"
    _driver(maas.url).power("reboot")
    assert [s.op for s in maas.seen if s.op.startswith("power_")] == ["power_off", "power_on"]
    assert maas.requests("power_off")[0].field("stop_mode") == ["hard"]
    assert maas.power_state == "on"
    maas.status = "Ready"
    _driver(maas.url).power("on")  # not ours yet: deploying powers it on
    assert len(maas.requests("power_on")) == 1


def test_without_a_system_id_the_machine_is_found_by_the_node_hostname(maas):
    maas.status, maas.power_state = "Deployed", "off"
    _driver(maas.url, system_id="").power("on")
    lookup = maas.seen[0]
    assert lookup.path == "/MAAS/api/2.0/machines/" and lookup.args == [("hostname", "gpu-maas-01")]
    assert maas.requests("power_on")[0].path == "/MAAS/api/2.0/machines/4y3h7n/op-power_on"
    maas.hostname = "another-name"
    with pytest.raises(DriverError, match="MAAS has 0 machines of that hostname") as caught:
        _driver(maas.url, system_id="").power("on")
    assert caught.value.permanent


def test_the_image_names_its_distro_series():
    assert distro_series_for("ubuntu-24.04-cuda-12.8") == "ubuntu/24.04"
    assert distro_series_for("ubuntu-22.04") == "ubuntu/22.04"
    with pytest.raises(DriverError, match="MAAS_DISTRO_SERIES"):
        distro_series_for("custom image")


def test_a_malformed_api_key_is_refused_without_echoing_it():
    with pytest.raises(DriverError) as caught:
        MaasApiKey.parse("just-one-part-secret")
    assert caught.value.permanent and "just-one-part-secret" not in caught.value.message
    assert "tSecretGhi789" not in repr(MaasApiKey.parse(API_KEY))


@pytest.mark.skipif(not (os.environ.get("MAAS_URL") and os.environ.get("MAAS_API_KEY")),
                    reason="a live MAAS is opt-in: set MAAS_URL and MAAS_API_KEY")
def test_live_maas():
    api = MaasApi(os.environ["MAAS_URL"], MaasApiKey.parse(os.environ["MAAS_API_KEY"]))
    machines = api.machines()
    assert isinstance(machines, list)
    assert all("system_id" in m and "status_name" in m for m in machines)
    if system_id := os.environ.get("MAAS_TEST_SYSTEM_ID"):
        assert api.machine(system_id)["system_id"] == system_id
        assert api.power_state(system_id) in ("on", "off", "unknown", "error")
