"""The provisioning pipeline on an Ironic node, with the real standalone Ironic in the loop
(tests/engines/ironic.py) and the sshd test host of tests/provisioning/test_pipeline_ssh.py
standing in for the installed system.

Order → approval → deploy_os through Ironic (available → deploying → active, the configdrive
received by the engine) → configure, stack, access, acceptance, handover over SSH → active →
termination → undeploy with Ironic's automated cleaning → available in Ironic → the node back in
stock. The node is a declared CPU test host: fake hardware images and erases nothing, so the
host's enrolled key stays pinned and the sanitise script cleans the stand-in host after Ironic's
cleaning (see provisioning/drivers/ironic.py)."""

import pytest

from portal.catalog.models import ServerSKU
from portal.orders.states import OrderState
from provisioning.fulfilment.orders import order_request_termination
from provisioning.inventory.services import node_enrol
from provisioning.models import ProvisioningRun, StepRun
from provisioning.states import STEPS, NodeState, RunKind
from provisioning.transitions import node_transition
from tests.engines.conftest_ironic import FirstBoot, stored_configdrive
from tests.factories import staff
from tests.provisioning.sshd import free_port
from tests.provisioning.stack.venv_cache import link_cached_tools
from tests.provisioning.test_pipeline_ssh import (  # noqa: F401 (fixtures)
    SKU,
    _os_image,
    approved_order,
    drive,
    gpu_host,
    log_of,
)


@pytest.fixture
def ironic_node(catalog, gpu_host, ironic_admin, settings):  # noqa: F811
    settings.PROVISIONING_STEP_LEASE_S = 1800  # acceptance trains for a minute or more
    image = _os_image()
    settings.PROVISIONING_OS_IMAGE = image
    user, password = ironic_admin.server.htpasswd
    settings.NODE_DRIVER_OPTIONS = {**settings.NODE_DRIVER_OPTIONS, "ironic": {
        "ironic": {"url": ironic_admin.server.url, "auth": "http_basic", "username": user,
                   "password": password, "timeout_s": 10},
        "images": {image: {"url": f"http://images.invalid/{image}.qcow2",
                           "checksum": "sha256:" + "cd" * 32}},
        "poll_interval_s": 0.2, "deploy_timeout_s": 120, "clean_timeout_s": 120,
        "user": gpu_host.user,
    }}
    return _enrol(ironic_admin, "l4-ironic-01", f"{gpu_host.host}:{gpu_host.port}",
                  host_key=gpu_host.host_public_key, private_key_file=str(gpu_host.key_file),
                  test_host=True)


def _enrol(ironic_admin, hostname: str, address: str, **options):
    engine_node = ironic_admin.enrol()
    operator = staff("operator")
    node = node_enrol(by=operator, sku=ServerSKU.objects.get(slug=SKU), hostname=hostname,
                      management_address=address, driver="ironic",
                      driver_options={"ironic": {"node": engine_node["uuid"]},
                                      "connect_timeout_s": 5, **options})
    node = node_transition(node=node, name="accept", by=operator, note="test fixture")
    node.engine_uuid = engine_node["uuid"]
    return node


@pytest.mark.torch
@pytest.mark.django_db
def test_an_order_goes_active_on_ironic_and_comes_back_to_stock_after_cleaning(ironic_node,
                                                                              ironic_admin):
    order = approved_order(ironic_node)
    run = ProvisioningRun.objects.get(order=order, kind=RunKind.PROVISION)

    outcomes = drive(run)

    assert outcomes == [f"{spec.name}:succeeded" for spec in STEPS[RunKind.PROVISION]], \
        StepRun.objects.filter(run=run).exclude(error="").values_list("step", "error").first()
    order.refresh_from_db()
    ironic_node.refresh_from_db()
    assert order.state == OrderState.ACTIVE and ironic_node.state == NodeState.ACTIVE
    deploy_log = log_of(run, "deploy_os")
    assert any(line.startswith("ironic: deploying → active") for line in deploy_log), deploy_log
    engine = ironic_admin.node(ironic_node.engine_uuid)
    assert engine["provision_state"] == "active"
    assert engine["extra"]["trainyard_deploy"]["image"] == _os_image()
    user_data = stored_configdrive(ironic_admin.server, ironic_node.engine_uuid)["user_data"]
    assert "hostname: l4-ironic-01" in user_data
    deploy = StepRun.objects.get(run=run, step="deploy_os")
    assert deploy.result["installed"] is True and deploy.result["host_keys_pinned"] == 0

    order_request_termination(order=order, by=order.placed_by)
    teardown = ProvisioningRun.objects.get(order=order, kind=RunKind.TERMINATE)
    assert drive(teardown) == [f"{spec.name}:succeeded" for spec in STEPS[RunKind.TERMINATE]], \
        StepRun.objects.filter(run=teardown).exclude(error="").values_list("step", "error").first()
    sanitise_log = " ".join(log_of(teardown, "sanitise"))
    assert "deleting" in sanitise_log and "cleaning" in sanitise_log
    assert "is cleaned and available" in sanitise_log
    engine = ironic_admin.node(ironic_node.engine_uuid)
    assert engine["provision_state"] == "available" and "trainyard_deploy" not in engine["extra"]
    order.refresh_from_db()
    ironic_node.refresh_from_db()
    assert order.state == OrderState.TERMINATED
    assert ironic_node.state == NodeState.READY  # back in stock
    assert StepRun.objects.get(run=teardown, step="attest").result["clean"] is True


@pytest.mark.django_db
def test_a_deploy_ironic_refuses_fails_the_step_with_ironics_reason(ironic_node, ironic_admin):
    ironic_admin.maintenance(ironic_node.engine_uuid, "BMC firmware update pending")
    order = approved_order(ironic_node)
    run = ProvisioningRun.objects.get(order=order, kind=RunKind.PROVISION)

    assert drive(run)[-1] == "deploy_os:failed"
    step = StepRun.objects.get(run=run, step="deploy_os")
    assert step.attempts == 1  # permanent: not retried
    assert "in maintenance in Ironic (BMC firmware update pending)" in step.error
    ironic_node.refresh_from_db()
    order.refresh_from_db()
    assert ironic_node.state == NodeState.FAILED_DEPLOY
    assert order.state == OrderState.PROVISION_FAILED
    assert ironic_admin.node(ironic_node.engine_uuid)["provision_state"] == "available"


@pytest.mark.django_db
def test_a_real_install_is_reached_by_the_host_key_it_was_given(ironic_node, ironic_admin,
                                                               gpu_host, tmp_path):  # noqa: F811
    """Not a test host: the installed system (cloud-init's stand-in, FirstBoot) presents the
    host key Trainyard made for this install; the deploy step pins it before its first SSH
    connection (the clean baseline, the node tools) and never trusts a key off the wire."""
    port = free_port()
    node = _enrol(ironic_admin, "l4-ironic-02", f"127.0.0.1:{port}",
                  private_key_file=str(gpu_host.key_file))
    root = tmp_path / "installed-root"
    link_cached_tools(root)  # the node tools, as the bootstrap would find them built
    boot = FirstBoot(ironic_admin.server, node.engine_uuid, tmp_path / "first-boot", port,
                     env={"TRAINYARD_ROOT": str(root)})
    boot.start()
    try:
        order = approved_order(node)
        run = ProvisioningRun.objects.get(order=order, kind=RunKind.PROVISION)
        outcomes = drive(run)
    finally:
        boot.stop()
    assert boot.error is None, boot.error
    assert outcomes[:2] == ["reserve:succeeded", "deploy_os:succeeded"], outcomes
    deploy = StepRun.objects.get(run=run, step="deploy_os")
    assert deploy.result["host_keys_pinned"] == 1 and deploy.result["baseline_recorded"] is True
    node.refresh_from_db()
    made = ironic_admin.node(node.engine_uuid)["extra"]["trainyard_deploy"]["host_key"]
    assert node.driver_options["host_key"] == made == boot.host.host_public_key
    assert node.events.filter(transition="pin_host_keys", order=order).exists()
    assert node.baseline_at is not None
