"""GET /api/v1/orders/<ref>/server and its day-2 actions (reboot, re-deploy)."""

import pytest

from portal.orders.states import OrderState
from provisioning.models import HealthCheck, ProvisioningRun, StepRun
from provisioning.pipeline.runs import run_create
from provisioning.states import RunKind, StepStatus
from tests.api.conftest import assert_problem, key_client
from tests.factories import make_node, make_order


@pytest.fixture
def active(people, catalog, sim_dir):
    order = make_order(people.acme, state=OrderState.ACTIVE)
    node = make_node(sku=order.sku, state_dir=sim_dir, state="active", hostname="gpu-0042")
    node.order = order
    node.save(update_fields=["order"])
    run = run_create(order=order, kind=RunKind.PROVISION, nodes=[node])
    StepRun.objects.filter(run=run, node=node, step="handover").update(
        status=StepStatus.SUCCEEDED, result={"hostname": "gpu-0042", "ssh_user": "train",
                                             "ssh_host": "203.0.113.7", "ssh_port": 2222})
    HealthCheck.objects.create(node=node, ok=True, gpu_count=8, expected_gpu_count=8,
                               max_temperature_c=61, ecc_errors=0, raw="nvidia-smi output")
    return order


def test_it_shows_access_and_health(active):
    body = key_client(active.organisation).get(f"/api/v1/orders/{active.reference}/server").json()
    assert body["nodes"][0]["ssh_command"] == "ssh -p 2222 train@203.0.113.7"
    assert body["health"][0]["hostname"] == "gpu-0042" and body["health"][0]["ok"] is True
    assert body["acceptance"] is None and body["storage"] is None
    assert "raw" not in body["health"][0]


def test_an_order_without_servers_has_no_access_yet(people, catalog):
    order = make_order(people.acme)
    body = key_client(people.acme).get(f"/api/v1/orders/{order.reference}/server").json()
    assert body == {"order": order.reference, "state": "draft", "nodes": [], "storage": None,
                    "acceptance": None, "health": []}


@pytest.mark.parametrize(("action", "kind"), [("reboot", RunKind.REBOOT),
                                              ("redeploy", RunKind.REDEPLOY_STACK)])
def test_day2_actions_start_a_run(active, action, kind):
    ProvisioningRun.objects.update(status="succeeded")
    response = key_client(active.organisation).post(
        f"/api/v1/orders/{active.reference}/server/{action}", format="json")
    assert response.status_code == 202, response.content
    assert response.json()["kind"] == kind
    assert ProvisioningRun.objects.filter(order=active, kind=kind).exists()


def test_a_day2_action_on_an_order_that_is_not_active_is_a_409(people, catalog):
    order = make_order(people.acme)
    response = key_client(people.acme).post(f"/api/v1/orders/{order.reference}/server/reboot")
    assert "only an active server" in assert_problem(response, 409)["detail"]


def test_a_read_key_cannot_reboot_and_an_outsider_gets_404(people, active):
    assert_problem(key_client(people.acme, scopes=["read"]).post(
        f"/api/v1/orders/{active.reference}/server/reboot"), 403)
    assert_problem(key_client(people.outsider_org).get(f"/api/v1/orders/{active.reference}/server"),
                   404)
