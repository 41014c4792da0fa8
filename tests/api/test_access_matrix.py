"""Every operation of /api/v1/ against four callers that must not get through, on real objects of a
reseller and of its customer: a revoked key (401 everywhere), a read-only key (403 on every
write; estimates and recommendations create nothing and are allowed), the customer's own key on
its reseller's objects and an outsider's key on both (404, never 403: nothing is confirmed to
exist). Afterwards nothing has changed."""

import pytest

from portal.accounts.models import ApiKey, Organisation, SSHKey
from portal.accounts.services import api_key_issue, api_key_revoke, ssh_key_add
from portal.orders.models import Order
from portal.orders.states import OrderState
from portal.quotes.models import Quote
from portal.webhooks.models import WebhookDelivery, WebhookEndpoint
from portal.webhooks.services import endpoint_create
from provisioning.models import ProvisioningRun
from tests.accounts.ssh_keygen import new_public_key
from tests.api.conftest import assert_problem, key_client
from tests.factories import L4_SKU, make_order, make_quote

URL = "https://hooks.example.com/in"
ORDER_OPS = [("get", ""), ("post", "/cancel"), ("post", "/terminate"), ("get", "/events"),
             ("get", "/server"), ("post", "/server/reboot"), ("post", "/server/redeploy"),
             ("post", "/server/storage/reveal"), ("post", "/server/storage/rotate"),
             ("get", "/server/stack-files"), ("get", "/server/stack-files/gpu-0001/env.sh"),
             ("get", "/server/metrics")]
WEBHOOK_OPS = [("get", ""), ("patch", ""), ("delete", ""), ("post", "/rotate-secret"), ("post", "/test"),
               ("get", "/deliveries")]
BODIES = {("patch", "webhooks"): {"enabled": False}, ("patch", "customers"): {"name": "Renamed"}}


class World:
    """The reseller's objects and its customer's, one of each kind."""

    def __init__(self, people):
        self.people = people
        self.objects = {}
        for who, org in (("reseller", people.reseller), ("child", people.client_org)):
            self.objects[who] = {
                "quote": make_quote(org, sku=L4_SKU, network="eth-1g", nvme="nvme-1tb-single"),
                "order": make_order(org, state=OrderState.ACTIVE, sku=L4_SKU, network="eth-1g",
                                    nvme="nvme-1tb-single"),
                "webhook": endpoint_create(organisation=org, url=URL)[0],
                "api_key": api_key_issue(organisation=org, name=f"{who} storefront").api_key,
                "ssh_key": ssh_key_add(public_key=new_public_key(), organisation=org),
            }

    def object_operations(self, who: str) -> list[tuple[str, str, dict]]:
        o = self.objects[who]
        ops = [("get", f"/api/v1/quotes/{o['quote'].reference}", {})]
        ops += [(m, f"/api/v1/orders/{o['order'].reference}{p}", {}) for m, p in ORDER_OPS]
        ops += [(m, f"/api/v1/webhooks/{o['webhook'].reference}{p}", BODIES.get((m, "webhooks"), {}))
                for m, p in WEBHOOK_OPS]
        ops += [("post", f"/api/v1/api-keys/{o['api_key'].prefix}/{action}", {})
                for action in ("revoke", "rotate")]
        ops += [("get", f"/api/v1/ssh-keys/{o['ssh_key'].pk}", {}),
                ("delete", f"/api/v1/ssh-keys/{o['ssh_key'].pk}", {})]
        if who == "reseller":  # the reseller's record of its customer
            slug = self.people.client_org.slug
            ops += [("get", f"/api/v1/customers/{slug}", {}),
                    ("patch", f"/api/v1/customers/{slug}", BODIES[("patch", "customers")])]
        return ops

    def collection_operations(self) -> list[tuple[str, str, dict]]:
        quote = {"sku": L4_SKU}
        return [("get", "/api/v1/catalog", {}), ("post", "/api/v1/estimates", {"model": "llama-3.1-8b"}),
                ("post", "/api/v1/recommendations", {"model": "gpt2-124m", "seq_len": 1024,
                                                     "options": {"top_n": 1}}),
                ("get", "/api/v1/quotes", {}), ("post", "/api/v1/quotes", quote),
                ("get", "/api/v1/orders", {}), ("post", "/api/v1/orders", {"configuration": quote}),
                ("get", "/api/v1/customers", {}), ("post", "/api/v1/customers", {"name": "New Co"}),
                ("get", "/api/v1/webhooks", {}), ("post", "/api/v1/webhooks", {"url": URL}),
                ("get", "/api/v1/api-keys", {}), ("post", "/api/v1/api-keys", {"name": "more"}),
                ("get", "/api/v1/ssh-keys", {}),
                ("post", "/api/v1/ssh-keys", {"public_key": new_public_key()})]

    def snapshot(self) -> dict:
        return {"orders": sorted(Order.objects.values_list("reference", "state")),
                "quotes": Quote.objects.count(), "runs": ProvisioningRun.objects.count(),
                "hooks": sorted(WebhookEndpoint.objects.values_list("reference", "enabled", "secret")),
                "deliveries": WebhookDelivery.objects.count(),
                "keys": sorted(ApiKey.objects.filter(revoked_at__isnull=True).values_list("prefix")),
                "ssh": SSHKey.objects.count(),
                "orgs": sorted(Organisation.objects.values_list("slug", "name"))}


@pytest.fixture
def world(catalog, people):
    return World(people)


def _call(client, method, path, body):
    return getattr(client, method)(path, body, format="json")


def test_a_revoked_key_is_refused_everywhere(world, people):
    client = key_client(people.reseller)
    api_key_revoke(api_key=client.api_key)
    before = world.snapshot()
    for method, path, body in (world.collection_operations() + world.object_operations("reseller")
                               + world.object_operations("child")):
        response = _call(client, method, path, body)
        assert_problem(response, 401)
        assert response["WWW-Authenticate"].startswith("Api-Key"), (method, path)
    assert world.snapshot() == before


def test_a_read_key_reads_and_cannot_write(world, people):
    client = key_client(people.reseller, scopes=["read"])
    before = world.snapshot()
    for method, path, body in (world.collection_operations() + world.object_operations("reseller")
                               + world.object_operations("child")):
        response = _call(client, method, path, body)
        if "/stack-files/" in path:
            assert_problem(response, 404)  # readable, but no such file on these orders
        elif method == "get" or path.endswith(("/estimates", "/recommendations")):
            assert response.status_code == 200, (method, path, response.content)
        else:
            assert_problem(response, 403)
    assert world.snapshot() == before


def test_a_customers_key_cannot_reach_its_resellers_objects(world, people):
    client = key_client(people.client_org)
    before = world.snapshot()
    for method, path, body in world.object_operations("reseller"):
        assert_problem(_call(client, method, path, body), 404)
    assert world.snapshot() == before


def test_an_outsider_gets_404_on_every_object(world, people):
    client = key_client(people.outsider_org)
    before = world.snapshot()
    for method, path, body in world.object_operations("reseller") + world.object_operations("child"):
        assert_problem(_call(client, method, path, body), 404)
    assert world.snapshot() == before


def test_the_reseller_reads_its_customers_objects(world, people):
    client = key_client(people.reseller)
    for method, path, _ in world.object_operations("child"):
        if method == "get" and "stack-files/" not in path:
            assert client.get(path).status_code == 200, path
