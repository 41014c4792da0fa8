"""The tenancy walk of the portal's pages: every route of ``portal.urls`` outside /api/ (walked in
tests/api/test_tenancy_walk.py), /admin/ and the staff console (/ops/), read from the URL conf
through its includes, filled with the identifiers of organisation A (a reseller and its customer)
and asked for by a signed-in admin of an unrelated organisation B (a reseller, and an organisation
that is no reseller):

- a page of one of A's objects: GET and POST answer 404 (or 405 where the page takes only the
  other method), name nothing of A, and change no row; where a route names B's own organisation
  and one of A's objects (``/orgs/<B>/webhooks/<A's>/``), still 404;
- a page without a parameter (lists, start pages): names nothing of A.

A's own admins reach every filled object (a GET answers 200, a POST anything but 404, inside a
rolled-back transaction), so the walk cannot pass on identifiers that point nowhere. A route the
walk does not know how to fill fails ``test_the_walk_knows_every_page``."""

import itertools
from collections.abc import Callable

from django.test import Client
from django.urls import resolve

from portal.urls import urlpatterns
from tests.factories import verified_login
from tests.tenancy_world import (
    Route,
    Side,
    changed,
    names_of_a,
    routes,
    snapshot,
    undone,
)

NOT_WALKED_PREFIXES = ("api/", "admin/", "ops/")  # the API has its own walk; staff see every tenant
PAGES = [r for r in routes(urlpatterns) if not r.route.startswith(NOT_WALKED_PREFIXES)]

# What of a side of A goes into a parameter, by (the first segment of the route, the literal
# segment before the parameter, its name), or by the last two alone: what that side's admin reaches.
FILL: dict[tuple, Callable[[Side], list]] = {
    ("orgs", "slug"): lambda s: [s.org.slug],
    ("billing", "slug"): lambda s: [s.org.slug],
    ("customers", "customer_slug"): lambda s: s.customers,
    ("keys", "prefix"): lambda s: [s.api_key.prefix],
    ("members", "membership_id"): lambda s: [s.member.pk],
    ("invitations", "reference"): lambda s: [s.invitation.reference],
    ("ssh-keys", "key_id"): lambda s: [s.ssh_key.pk],
    ("account", "ssh-keys", "key_id"): lambda s: [s.personal_ssh_key.pk],  # the admin's own
    ("webhooks", "reference"): lambda s: [s.webhook.reference],
    ("orders", "pk"): lambda s: [s.order.pk],
    ("orders", "reference"): lambda s: [s.order.reference],
    ("place", "quote_reference"): lambda s: [s.quote.reference],
    ("quotes", "reference"): lambda s: [s.quote.reference],
    ("invoices", "number"): lambda s: [s.invoice.number] if s.invoice else [],  # billed: the reseller
    # A's orders have no nodes, so no files: the order, A's, is what a stranger must not pass.
    ("files", "hostname"): lambda s: [s.node],
    ("files", "name"): lambda s: ["env.sh"],
}
# The parameter that names the organisation a page belongs to (B's own goes there in the cross walk).
ORGANISATION_PARAMETERS = {("orgs", "slug"), ("billing", "slug")}
# Not an organisation's object: a link's signed token (whoever holds the link uses it, signed in
# as anyone) or a monitoring system's bearer token.
NOT_WALKED = {
    "password_reset_confirm": "a password reset link's signed token, for one person",
    "account:email-confirm": "the link e-mailed to confirm an address: a signed token",
    "account:signup-verify": "the link e-mailed to verify a sign-up: a signed token",
    "account:invitation": "an invitation's link: whoever holds it may accept it (tests/accounts)",
    "monitoring:targets": "Prometheus's scrape targets, behind its bearer token",
    "api-not-found": "/api/'s catch-all 404 (a regex: the API walk covers /api/)",
}
# Pages whose owner answers other than 200 to a filled GET, and why.
NO_CONTROL = {"orders:stack-file": "A's orders have no nodes, so no files"}
# Query parameters that name an organisation (not in the URL conf: read from the views).
QUERY_PROBES: dict[str, tuple[str, Callable[[Side], list]]] = {
    "orders:list": ("customer", lambda s: [s.org.slug]),
    "quotes:configure": ("organisation", lambda s: [s.org.slug]),
    "quotes:price": ("organisation", lambda s: [s.org.slug]),
    "accounts:resale-prices": ("customer", lambda s: s.customers),
    "accounts:resale-prices-reset": ("customer", lambda s: s.customers),
}
# Pages without a parameter that a GET must not call: it would sign the walker out.
NOT_ASKED = {"logout": "signs out"}


def filler(route: Route, key: tuple[str, str]):
    root = route.route.split("/", 1)[0]
    return FILL.get((root, *key)) or FILL.get(key)


def filled(route: Route, sides: list[Side], own_slug: str | None = None) -> list[tuple[Side, str]]:
    """(the side of A that owns them, the path) for each way to fill ``route`` with A's (with
    the query parameter of QUERY_PROBES too); with ``own_slug``, the organisation parameter is
    B's own (only where A's objects fill something else: another parameter or the query)."""
    out = []
    params = route.parameters
    probe = QUERY_PROBES.get(route.name)
    if own_slug is not None and (not set(params) & ORGANISATION_PARAMETERS
                                 or (len(params) < 2 and probe is None)):
        return out
    for side in sides:
        values = [[own_slug] if own_slug is not None and key in ORGANISATION_PARAMETERS
                  else filler(route, key)(side) for key in params]
        for combination in itertools.product(*values):
            path = route.path({name: v for (_, name), v in zip(params, combination, strict=True)})
            match = resolve(path)
            name = f"{match.namespace}:{match.url_name}" if match.namespace else match.url_name
            assert name == route.name, (path, name)  # the page asked for, no other
            queries = [f"?{probe[0]}={v}" for v in probe[1](side)] if probe else []
            # B's own slug alone, with nothing of A's in the path: only the query names A's.
            only_query = own_slug is not None and len(params) < 2
            out += [(side, path + query) for query in (queries if only_query else ["", *queries])]
    return out


def test_the_walk_knows_every_page():
    unknown = []
    for route in PAGES:
        if route.name in NOT_WALKED:
            continue
        if "(regex)" in route.route:
            unknown.append(f"{route.name}: a regex route cannot be filled")
        for key in route.parameters:
            if filler(route, key) is None:
                unknown.append(f"{route.name}: no filler for parameter {key}")
    assert not unknown, "\n".join(unknown)
    stale = (set(NOT_WALKED) | set(NO_CONTROL) | set(NOT_ASKED) | set(QUERY_PROBES)) - {r.name for r in PAGES}
    assert not stale, f"entries for pages that no longer exist: {stale}"


def test_a_stranger_gets_404_on_every_page_of_a(tenancy_world, stranger):
    client, hidden = verified_login(Client(), stranger.admin), tenancy_world.a_markers()
    before, wrong, walked = snapshot(), [], 0
    for route in PAGES:
        if not route.parameters or route.name in NOT_WALKED:
            continue
        paths = filled(route, tenancy_world.a) + filled(route, tenancy_world.a, own_slug=stranger.org.slug)
        if not filled(route, tenancy_world.a):
            wrong.append(f"{route.name}: no object of A fills {route.route}")
        for _, path in paths:
            answers = {}
            for method in ("get", "post"):
                walked += 1
                response = getattr(client, method)(path)
                answers[method] = response.status_code
                leaked = names_of_a(response, hidden, path)
                if response.status_code not in (404, 405) or leaked:
                    wrong.append(f"{method.upper()} {path}: {response.status_code}, names {leaked}")
                if moved := changed(before, snapshot()):
                    wrong.append(f"{method.upper()} {path}: changed {moved}")
                    before = snapshot()
            if set(answers.values()) == {405}:
                wrong.append(f"{path}: neither GET nor POST is answered: the walk asks nothing")
    assert not wrong, "\n".join(wrong)
    assert walked >= 80, walked


def test_the_pages_without_a_parameter_name_nothing_of_a(tenancy_world, stranger):
    client, hidden = verified_login(Client(), stranger.admin), tenancy_world.a_markers()
    wrong, walked = [], 0
    for route in PAGES:
        if route.parameters or route.name in NOT_WALKED or route.name in NOT_ASKED:
            continue
        probe = QUERY_PROBES.get(route.name)
        queries = [""] + ([f"?{probe[0]}={v}" for side in tenancy_world.a for v in probe[1](side)]
                          if probe else [])
        for query in queries:
            walked += 1
            response = client.get(route.path({}) + query, follow=True)
            leaked = names_of_a(response, hidden, query)
            if response.status_code >= 500 or (query and response.status_code not in (200, 404)) or leaked:
                wrong.append(f"GET /{route.route}{query}: {response.status_code}, names {leaked}")
    assert not wrong, "\n".join(wrong)
    assert walked >= 15, walked


def test_a_own_admins_reach_every_page_the_walk_fills(tenancy_world):
    """The control: the identifiers the walk uses are real: each page is reached by the admin of
    the side of A that owns them (a GET answers 200 or a redirect, a POST anything but 404,
    inside a rolled-back transaction), for some way of filling it and, where the page reads a
    query parameter, with it. (Not every way: a customer's slug on a reseller's page is 404 to
    its own admin too.)"""
    clients = {side.org.pk: verified_login(Client(), side.admin) for side in tenancy_world.a}
    unreached = []
    for route in PAGES:
        if not route.parameters or route.name in NOT_WALKED or route.name in NO_CONTROL:
            continue
        reached = set()
        for side, path in filled(route, tenancy_world.a):
            client = clients[side.org.pk]
            response = client.get(path)
            if response.status_code == 405:
                response = undone(client.post, path)
                if response.status_code != 404:
                    reached.add("?" in path)
            elif response.status_code in (200, 302):
                reached.add("?" in path)
        wanted = {True} if route.name in QUERY_PROBES else {False}
        if not wanted <= reached:
            unreached.append(f"{route.name}: no filled path reaches A's own admin ({reached})")
    assert not unreached, "\n".join(unreached)
