"""The role table of docs/api.md ("Who may do what"), walked: every organisation-scoped endpoint
for a plain member and an admin of a reseller and of one of its customers (signed in), on the
reseller's objects and on the customer's. The table is read from the document, so the two cannot
drift apart. A refusal names nothing the caller may not see, and changes nothing."""

import re
from dataclasses import dataclass
from functools import cached_property

import pytest
from django.urls import resolve
from rest_framework.test import APIClient

from portal.accounts.models import ApiKey, Invitation, Membership, Organisation, SSHKey
from portal.accounts.services import api_key_issue, ssh_key_add
from portal.accounts.team import invitation_create
from portal.orders.models import Order
from portal.orders.states import OrderState
from portal.quotes.models import Quote
from portal.webhooks.models import WebhookDelivery, WebhookEndpoint
from portal.webhooks.services import endpoint_create
from tests.accounts.ssh_keygen import new_public_key
from tests.conftest import REPO_ROOT
from tests.factories import L4_SKU, make_order, make_quote, member_of, verified_login

ROLES = ("reseller member", "reseller admin", "customer member", "customer admin")
HOOK = "https://hooks.example.com/in"
INVITEE = "invitee@deeplabs.example"
L4 = {"sku": L4_SKU, "network": "eth-1g", "nvme": "nvme-1tb-single"}
# Endpoints the walk does not call, and why.
NOT_WALKED = {"server-stack-file": "one file of a node: a 404 here for everyone (these orders "
                                   "have no files); its order is looked up as orders.read's",
              # Invoices are issued to the organisation billed (a reseller's customers' usage goes
              # on the reseller's): the reseller's admins read them, other organisations get 404
              # (tests/billing/test_invoice_documents.py, test_resellers.py).
              "invoices": "issued invoices, walked in tests/billing",
              "invoice": "issued invoices, walked in tests/billing",
              "invoice-pdf": "issued invoices, walked in tests/billing"}


@dataclass(frozen=True)
class Row:
    key: str
    whose: str  # "reseller's", "customer's", "own" or "—"
    expected: dict  # role -> "yes" | "403" | "404"


def role_table() -> list[Row]:
    text = (REPO_ROOT / "docs" / "api.md").read_text()
    section = text.split("## Who may do what", 1)[1].split("\n## ", 1)[0]
    rows, header = [], None
    for line in section.splitlines():
        if not line.startswith("|") or set(line) <= set("|- "):
            continue
        cells = [c.strip() for c in line.strip("|").split("|")]
        if header is None:
            header = cells
            assert tuple(header[3:]) == ROLES, header
            continue
        key = re.fullmatch(r"`([a-z.-]+)`", cells[0]).group(1)
        rows.append(Row(key=key, whose=cells[2], expected=dict(zip(ROLES, cells[3:], strict=True))))
    return rows


@dataclass(frozen=True)
class Probe:
    method: str
    path: str
    body: dict | None = None
    kind: str = "one"  # one object; "list": is `listed` in the answer; "create": names `customer`
    listed: str = ""


class World:
    """A reseller and its customer, with one of each object, built as a probe needs it."""

    def __init__(self, people):
        self.people = people
        self.orgs = {"reseller's": people.reseller, "customer's": people.client_org}

    @cached_property
    def callers(self) -> dict:
        p = self.people
        cody = member_of(p.client_org, username="cody")
        Membership.objects.filter(user=cody).update(role=Membership.Role.ADMIN)
        return {"reseller member": member_of(p.reseller, username="ron"), "reseller admin": p.rita,
                "customer member": member_of(p.client_org, username="cora"), "customer admin": cody}

    def own(self, role: str) -> Organisation:
        return self.people.reseller if role.startswith("reseller") else self.people.client_org

    @cached_property
    def objects(self) -> dict:
        made = {}
        for whose, org in self.orgs.items():
            made[whose] = {
                "quote": make_quote(org, **L4),
                "order": make_order(org, state=OrderState.ACTIVE, **L4),
                "webhook": endpoint_create(organisation=org, url=HOOK)[0],
                "api_key": api_key_issue(organisation=org, name=f"{org.slug} storefront").api_key,
                "ssh_key": ssh_key_add(public_key=new_public_key(), organisation=org),
            }
        return made

    @cached_property
    def invitation(self) -> Invitation:
        return invitation_create(organisation=self.people.client_org, email=INVITEE,
                                 by=self.people.rita)

    def probes(self, key: str, whose: str) -> list[Probe]:
        if key == "sizing":
            return [Probe("get", "/api/v1/catalog"),
                    Probe("post", "/api/v1/estimates", {"model": "llama-3.1-8b"}),
                    Probe("post", "/api/v1/recommendations",
                          {"model": "gpt2-124m", "seq_len": 1024, "options": {"top_n": 1}})]
        if whose == "own":
            return {"webhooks.add": [Probe("post", "/api/v1/webhooks", {"url": HOOK})],
                    "api-keys.issue": [Probe("post", "/api/v1/api-keys", {"name": "more"})],
                    "customers.create": [Probe("post", "/api/v1/customers", {"name": "New Co"})]}[key]
        org = self.orgs[whose]
        if key.startswith("customers.") or key == "invitations":
            self.invitation  # noqa: B018 - one pending, whose address no refusal may show
            base = f"/api/v1/customers/{org.slug}"
            return {"customers.list": [Probe("get", "/api/v1/customers", kind="list", listed=org.slug)],
                    "customers.read": [Probe("get", base), Probe("patch", base, {"name": "Renamed"})],
                    "invitations": [Probe("get", f"{base}/invitations"),
                                    Probe("post", f"{base}/invitations",
                                          {"email": "dana@deeplabs.example"})]}[key]
        o = self.objects[whose]
        order, hook, key_prefix = o["order"].reference, o["webhook"].reference, o["api_key"].prefix
        customer = {"customer": org.slug}
        configuration = {"sku": L4_SKU, "network": "eth-1g"}
        return {
            "quotes.read": [Probe("get", f"/api/v1/quotes/{o['quote'].reference}"),
                            Probe("get", "/api/v1/quotes", kind="list", listed=o["quote"].reference)],
            "quotes.create": [Probe("post", "/api/v1/quotes", configuration | customer, "create")],
            "orders.read": [Probe("get", f"/api/v1/orders/{order}{tail}")
                            for tail in ("", "/events", "/server", "/server/stack-files",
                                         "/server/metrics")]
                           + [Probe("get", "/api/v1/orders", kind="list", listed=order)],
            "usage.read": [Probe("get", f"/api/v1/usage?customer={org.slug}"),
                           Probe("get", f"/api/v1/usage?order={order}")],
            "orders.create": [Probe("post", "/api/v1/orders",
                                    {"configuration": configuration} | customer, "create")],
            "orders.act": [Probe("post", f"/api/v1/orders/{order}{tail}", {})
                           for tail in ("/cancel", "/server/reboot", "/server/redeploy",
                                        "/server/storage/reveal", "/server/storage/rotate",
                                        "/terminate", "/storage/read-only-key",
                                        "/storage/read-only-key/reveal")],
            "ssh-keys.read": [Probe("get", f"/api/v1/ssh-keys/{o['ssh_key'].pk}"),
                              Probe("get", "/api/v1/ssh-keys", kind="list",
                                    listed=o["ssh_key"].fingerprint)],
            "ssh-keys.change": [Probe("post", "/api/v1/ssh-keys",
                                      {"public_key": new_public_key()} | customer, "create"),
                                Probe("delete", f"/api/v1/ssh-keys/{o['ssh_key'].pk}")],
            "webhooks.read": [Probe("get", f"/api/v1/webhooks/{hook}"),
                              Probe("get", f"/api/v1/webhooks/{hook}/deliveries"),
                              Probe("get", "/api/v1/webhooks", kind="list", listed=hook)],
            "webhooks.change": [Probe("patch", f"/api/v1/webhooks/{hook}", {"description": "x"}),
                                Probe("post", f"/api/v1/webhooks/{hook}/rotate-secret"),
                                Probe("post", f"/api/v1/webhooks/{hook}/test"),
                                Probe("delete", f"/api/v1/webhooks/{hook}")],
            "api-keys.read": [Probe("get", "/api/v1/api-keys", kind="list", listed=key_prefix)],
            "api-keys.change": [Probe("post", f"/api/v1/api-keys/{key_prefix}/revoke"),
                                Probe("post", f"/api/v1/api-keys/{key_prefix}/rotate")],
        }[key]

    def snapshot(self) -> dict:
        return {"orders": sorted(Order.objects.values_list("reference", "state")),
                "quotes": Quote.objects.count(),
                "hooks": sorted(WebhookEndpoint.objects.values_list("reference", "description",
                                                                    "secret")),
                "deliveries": WebhookDelivery.objects.count(),
                "keys": sorted(ApiKey.objects.filter(revoked_at__isnull=True).values_list("prefix")),
                "ssh": SSHKey.objects.count(), "invitations": Invitation.objects.count(),
                "orgs": sorted(Organisation.objects.values_list("slug", "name"))}


def _listed(body: dict, value: str) -> bool:
    return value in str(body.get("results", body))


def _check(probe: Probe, response, expected: str, hidden_names: list[str]) -> str:
    """Why ``response`` does not answer as the table says ("" when it does)."""
    status, text = response.status_code, response.content.decode()
    if status >= 500 or status == 401:
        return f"{status}: {text[:300]}"
    if expected != "yes":
        leaked = [name for name in hidden_names if name in text]
        if leaked:
            return f"the refusal names {leaked}: {text[:300]}"
    if probe.kind == "list":
        if expected == "403":
            return "" if status == 403 else f"expected 403, got {status}"
        if status != 200:
            return f"expected 200, got {status}: {text[:300]}"
        shown = _listed(response.json(), probe.listed)
        return "" if shown == (expected == "yes") else f"listed={shown}, table says {expected}"
    no_customer = (probe.kind == "create" and status == 400
                   and "customer" in response.json().get("errors", {}))
    if expected == "yes":
        return "" if status not in (403, 404) and not no_customer else f"{status}: {text[:300]}"
    if expected == "404":
        return "" if status == 404 or no_customer else f"expected 404, got {status}: {text[:300]}"
    return "" if status == 403 else f"expected 403, got {status}: {text[:300]}"


CASES = [(role, row) for row in role_table() for role in ROLES]


@pytest.mark.parametrize(("role", "row"), CASES,
                         ids=[f"{role}-{row.key}-{row.whose}" for role, row in CASES])
def test_the_role_table(catalog, people, role, row):
    world = World(people)
    user = world.callers[role]
    client = APIClient()
    verified_login(client, user)
    mine = set(Membership.objects.filter(user=user).values_list("organisation_id", flat=True))
    hidden = [org.name for org in (people.reseller, people.client_org) if org.pk not in mine]
    hidden.append(INVITEE)
    probes = world.probes(row.key, row.whose)
    expected = row.expected[role]
    before = world.snapshot()
    wrong = []
    for probe in probes:
        response = getattr(client, probe.method)(probe.path, probe.body, format="json")
        problem = _check(probe, response, expected, hidden)
        if problem:
            wrong.append(f"{probe.method.upper()} {probe.path}: {problem}")
    assert not wrong, f"{role} on {row.key} ({row.whose}), table says {expected}:\n" + "\n".join(wrong)
    if expected != "yes":
        assert world.snapshot() == before, "a refused call changed something"


def test_the_table_walks_every_organisation_scoped_endpoint(catalog, people):
    world = World(people)
    walked = {resolve(probe.path.split("?")[0]).url_name
              for row in role_table() for probe in world.probes(row.key, row.whose)}
    from portal.api.v1.urls import urlpatterns

    every = {pattern.name for pattern in urlpatterns}
    assert every - walked == set(NOT_WALKED), every - walked


def test_the_table_has_every_role_for_every_row():
    rows = role_table()
    assert len(rows) >= 29
    for row in rows:
        assert set(row.expected.values()) <= {"yes", "403", "404"}, row
