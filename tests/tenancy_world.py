"""Two tenants for the tenancy walks (tests/api/test_tenancy_walk.py, tests/test_page_tenancy_walk.py):
organisation A, a reseller with one customer, each holding one of every object an endpoint or a
page reads; and unrelated organisations B (a reseller with its own customer, and a plain
organisation) holding their own. Also: the URL confs as routes with their parameters, and a
snapshot of every row, so that a refused call can be shown to have changed nothing."""

import re
from dataclasses import dataclass, field
from datetime import UTC, datetime

from django.apps import apps
from django.db import transaction
from django.urls import URLPattern, URLResolver
from django.urls.resolvers import RoutePattern

from portal.accounts.models import ApiKey, Invitation, Membership, Organisation, SSHKey, User
from portal.accounts.services import api_key_issue, ssh_key_add
from portal.accounts.team import invitation_create
from portal.billing import invoices
from portal.billing.models import BillingProfile, Invoice
from portal.billing.selectors import month_of
from portal.billing.services import usage_sync
from portal.orders.models import Order, OrderEvent
from portal.orders.states import OrderState
from portal.quotes.models import Quote
from portal.webhooks.models import WebhookDelivery, WebhookEndpoint
from portal.webhooks.publish import endpoint_test_send
from portal.webhooks.services import endpoint_create
from tests.accounts.ssh_keygen import new_public_key
from tests.factories import L4_SKU, OrganisationFactory, make_order, make_quote, member_of

L4 = {"sku": L4_SKU, "network": "eth-1g", "nvme": "nvme-1tb-single"}
MARCH = month_of(datetime(2026, 3, 1, tzinfo=UTC))


@dataclass
class Side:
    """One organisation and one of each of its objects (``invoice``: None where another
    organisation is billed, as a reseller is for its customers)."""

    org: Organisation
    admin: User
    member: Membership  # a plain member's membership
    quote: Quote
    order: Order
    webhook: WebhookEndpoint
    delivery: WebhookDelivery
    api_key: ApiKey
    key_plaintext: str
    ssh_key: SSHKey
    personal_ssh_key: SSHKey  # the admin's own key
    invitation: Invitation
    node: str  # the metered node's name on usage and invoices
    customers: list[str] = field(default_factory=list)  # slugs of its customers
    invoice: Invoice | None = None

    def markers(self) -> set[str]:
        """Strings that name this organisation or one of its objects: none may reach an outsider."""
        people = [self.admin, self.member.user]
        return {self.org.name, self.org.slug, self.quote.reference, self.order.reference,
                self.webhook.reference, self.webhook.url, self.api_key.prefix, self.api_key.name,
                self.ssh_key.fingerprint, self.ssh_key.name, self.personal_ssh_key.fingerprint,
                self.invitation.reference, self.invitation.email, self.node,
                *(p.username for p in people), *(p.email for p in people),
                *([self.invoice.number] if self.invoice else [])} - {""}


def _side(org: Organisation, *, admin_role: str) -> Side:
    tag = org.slug
    admin = member_of(org, username=f"{tag}-admin")
    Membership.objects.filter(user=admin).update(role=admin_role)
    member = member_of(org, username=f"{tag}-member")
    order = make_order(org, state=OrderState.ACTIVE, **L4)
    OrderEvent.objects.create(order=order, transition="activate", from_state=OrderState.PROVISIONING,
                              to_state=OrderState.ACTIVE, note=f"{tag} is live")
    node = f"gpu-{tag}-1"
    usage_sync(order=order, nodes={1: node}, storage=False, at=datetime(2026, 3, 3, 9, tzinfo=UTC), cause="t")
    usage_sync(order=order, nodes={}, storage=False, at=datetime(2026, 3, 3, 21, tzinfo=UTC), cause="t")
    webhook = endpoint_create(organisation=org, url=f"https://hooks.example.com/{tag}")[0]
    issued = api_key_issue(organisation=org, name=f"{tag} storefront")
    return Side(
        org=org, admin=admin, member=Membership.objects.get(user=member),
        quote=make_quote(org, **L4), order=order, webhook=webhook,
        delivery=endpoint_test_send(endpoint=webhook), api_key=issued.api_key,
        key_plaintext=issued.plaintext,
        ssh_key=ssh_key_add(public_key=new_public_key(comment=f"{tag}@ci"), name=f"{tag} deploy",
                            organisation=org),
        personal_ssh_key=ssh_key_add(public_key=new_public_key(comment=f"{tag}-admin@laptop"),
                                     name=f"{tag} laptop", user=admin),
        invitation=invitation_create(organisation=org, email=f"invitee@{tag}.example", by=admin),
        node=node)


@dataclass
class Tenants:
    a: list[Side]  # A: the reseller, then its customer
    b_reseller: list[Side]  # B: an unrelated reseller, then its customer
    b_plain: Side  # B': an unrelated organisation that is no reseller

    def a_markers(self) -> set[str]:
        return set().union(*(side.markers() for side in self.a))


def tenants(staff_member, monkeypatch) -> Tenants:
    """Builds A and the two Bs (needs the seeded catalog), and issues March's invoices."""
    monkeypatch.setattr(invoices.invoice_issued_notify_task, "delay", lambda pk: None)

    def reseller_with_customer(name: str, slug: str) -> list[Side]:
        reseller = OrganisationFactory(name=f"{name} Resale", slug=f"{slug}-resale",
                                       kind=Organisation.Kind.RESELLER)
        customer = OrganisationFactory(name=f"{name} Client", slug=f"{slug}-client", parent=reseller)
        sides = [_side(reseller, admin_role=Membership.Role.RESELLER_ADMIN),
                 _side(customer, admin_role=Membership.Role.ADMIN)]
        sides[0].customers = [customer.slug]
        return sides

    made = Tenants(a=reseller_with_customer("Alpha", "alpha"),
                   b_reseller=reseller_with_customer("Bravo", "bravo"),
                   b_plain=_side(OrganisationFactory(name="Delta Lab", slug="delta-lab"),
                                 admin_role=Membership.Role.ADMIN))
    billed = [made.a[0], made.b_reseller[0], made.b_plain]
    for side in billed:
        BillingProfile.objects.create(organisation=side.org, legal_name=f"{side.org.name} GmbH",
                                      address="Hauptstr. 1\n10115 Berlin", country="DE",
                                      email=f"ap@{side.org.slug}.example")
    invoices.month_close(period=MARCH, now=datetime(2026, 4, 2, tzinfo=UTC))
    for side in billed:
        draft = Invoice.objects.get(organisation=side.org, state=Invoice.State.DRAFT)
        side.invoice = invoices.invoice_finalise(invoice=draft, by=staff_member)
    return made


# --- routes -------------------------------------------------------------------------------------
PARAMETER = re.compile(r"<(?:(?P<converter>[^>:]+):)?(?P<name>[^>]+)>")


@dataclass(frozen=True)
class Route:
    route: str  # Django's route syntax, from the root of the walked URL conf
    name: str  # namespaced, e.g. "orders:detail"
    pattern: URLPattern

    @property
    def parameters(self) -> list[tuple[str, str]]:
        """(the literal segment before it, its name) for each parameter, in order: what the walks
        key their fillers by ("orders", "reference")."""
        found, literal = [], ""
        for segment in self.route.split("/"):
            match = PARAMETER.fullmatch(segment)
            if match:
                found.append((literal, match["name"]))
            elif segment and not PARAMETER.search(segment):
                literal = segment
        return found

    def path(self, values: dict) -> str:
        return "/" + PARAMETER.sub(lambda m: str(values[m["name"]]), self.route)

    @property
    def view_class(self):
        return getattr(self.pattern.callback, "view_class", None)


def routes(patterns, prefix: str = "", namespace: str = "") -> list[Route]:
    """Every URL pattern below ``patterns``, through nested includes. A pattern that is a regular
    expression (``re_path``) cannot be filled from its parameters; it comes back with its regex as
    its route, and the walks' coverage check names it."""
    found = []
    for pattern in patterns:
        if isinstance(pattern, URLResolver):
            ns = f"{namespace}{pattern.namespace}:" if pattern.namespace else namespace
            found += routes(pattern.url_patterns, prefix + str(pattern.pattern), ns)
        else:
            regex = not isinstance(pattern.pattern, RoutePattern)
            found.append(Route(route=prefix + str(pattern.pattern) + ("  (regex)" if regex else ""),
                               name=f"{namespace}{pattern.name}", pattern=pattern))
    return found


# --- nothing changed ----------------------------------------------------------------------------
# What a request changes whoever sends it: not data of any tenant.
NOT_COMPARED_MODELS = {"sessions.Session", "axes.AccessAttempt", "axes.AccessLog",
                       "axes.AccessFailureLog", "axes.AccessAttemptExpiration", "admin.LogEntry",
                       "contenttypes.ContentType", "auth.Permission"}
NOT_COMPARED_FIELDS = {("accounts.ApiKey", "last_used_at"),  # set by each authenticated call
                       ("accounts.User", "last_login")}


def snapshot() -> dict[str, list[str]]:
    """Every row of every table (less the bookkeeping above), to compare before and after."""
    rows = {}
    for model in apps.get_models():
        label = model._meta.label
        if label in NOT_COMPARED_MODELS:
            continue
        names = [f.attname for f in model._meta.concrete_fields
                 if (label, f.name) not in NOT_COMPARED_FIELDS]
        rows[label] = sorted(map(repr, model._base_manager.values_list(*names)))
    return rows


def changed(before: dict, after: dict) -> list[str]:
    return [label for label in before if before[label] != after[label]]


def names_of_a(response, hidden: set[str], sent: str) -> list[str]:
    """A's identifiers in the answer, less those the caller sent itself (a problem's ``instance``
    is the path asked for)."""
    text = b"".join(response.streaming_content if response.streaming else [response.content])
    text = text.decode(errors="replace")
    return sorted(m for m in hidden if m in text and m not in sent)


class Undo(Exception):
    pass


def undone(call, *args, **kwargs):
    """``call()``'s answer, with everything it wrote rolled back."""
    answer = []
    try:
        with transaction.atomic():
            answer.append(call(*args, **kwargs))
            raise Undo
    except Undo:
        return answer[0]
