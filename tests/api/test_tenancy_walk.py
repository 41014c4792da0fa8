"""The tenancy walk of /api/v1/: every route of ``portal.api.v1.urls``, read from the URL conf (names,
path converters, the methods each view answers) and the OpenAPI schema (query parameters and the
fields of a create that name an object), filled with the identifiers of organisation A (a reseller
and its customer) and called with the API key of an unrelated organisation B: a reseller with its
own customer, and an organisation that is no reseller.

- one object (a path parameter): 404, never 403 or 200, and the answer names nothing of A; every
  unsafe method the route has: 404 too, and no row of any table changed;
- a list: 200 with none of A's identifiers, and with B's own object (so the check cannot pass on an
  empty list); filtered by one of A's (``?customer=``, ``?order=``): 404 or 200 without A's;
- a create naming one of A's (``"customer"``, ``"quote"``): 400 on that field, nothing made.

A's own keys reach every filled object (200, or anything but 404 inside a rolled-back
transaction), so the walk cannot pass on identifiers that point nowhere. A route the walk does
not know how to fill fails ``test_the_walk_knows_every_route``."""

import itertools
from collections.abc import Callable

from django.urls import resolve
from drf_spectacular.generators import SchemaGenerator
from rest_framework.test import APIClient

from portal.api.v1.urls import urlpatterns
from tests.accounts.ssh_keygen import new_public_key
from tests.factories import L4_SKU
from tests.tenancy_world import (
    Route,
    Side,
    changed,
    names_of_a,
    routes,
    snapshot,
    undone,
)

UNSAFE = ("post", "put", "patch", "delete")
ROUTES = routes(urlpatterns, "api/v1/", "api-v1:")

# What of a side of A goes into a path parameter, by (the literal segment before it, its name):
# what that side's own key reaches.
FILL: dict[tuple[str, str], Callable[[Side], list]] = {
    ("quotes", "reference"): lambda s: [s.quote.reference],
    ("orders", "reference"): lambda s: [s.order.reference],
    ("webhooks", "reference"): lambda s: [s.webhook.reference],
    ("customers", "slug"): lambda s: s.customers,  # a reseller's record of its customer
    ("ssh-keys", "key_id"): lambda s: [s.ssh_key.pk],
    ("api-keys", "prefix"): lambda s: [s.api_key.prefix],
    ("invoices", "number"): lambda s: [s.invoice.number] if s.invoice else [],  # billed: the reseller
    # A's orders have no nodes, so no files: the order, A's, is what a stranger must not pass.
    ("stack-files", "hostname"): lambda s: [s.node],
    ("stack-files", "name"): lambda s: ["env.sh"],
}
# Routes whose filled GET answers A's own key 404 as well, and why.
NO_CONTROL = {"api-v1:server-stack-file": "A's orders have no nodes, so no files to download"}

# Query parameters (from the schema): those that name an object get A's; the others name none.
QUERY_FILL: dict[str, Callable[[Side], list]] = {
    "customer": lambda s: [s.org.slug], "order": lambda s: [s.order.reference]}
QUERY_NAMES_NOTHING = {"cursor", "limit", "state", "created_after", "created_before", "month",
                       "metric", "range", "format"}

# Create fields (from the schema) that name an object, and a body that is valid but for them.
BODY_FILL: dict[str, Callable[[Side], list]] = {
    "customer": lambda s: [s.org.slug], "quote": lambda s: [s.quote.reference]}
BODY_NAMES_NOTHING = {"name", "scopes", "slug", "email", "role", "url", "event_types", "description",
                      "enabled", "reason", "note", "public_key", "configuration", "plan",
                      *("network", "node_count", "nvme", "sku", "storage_custom", "storage_provider",
                        "storage_retention_days", "storage_tb", "strategy", "tracker")}
L4_CONFIGURATION = {"sku": L4_SKU, "network": "eth-1g"}
CREATE_NAMING: dict[tuple[str, str], Callable[[str], dict]] = {
    ("api-v1:quotes", "customer"): lambda v: L4_CONFIGURATION | {"customer": v},
    ("api-v1:orders", "customer"): lambda v: {"configuration": L4_CONFIGURATION, "customer": v},
    ("api-v1:orders", "quote"): lambda v: {"quote": v},
    ("api-v1:ssh-keys", "customer"): lambda v: {"public_key": new_public_key(), "customer": v},
}

# A list answers with B's own object: which one (None: B has none of this kind).
OWN: dict[str, Callable[[Side], str | None]] = {
    "api-v1:quotes": lambda s: s.quote.reference, "api-v1:orders": lambda s: s.order.reference,
    "api-v1:customers": lambda s: s.customers[0] if s.customers else None,
    "api-v1:ssh-keys": lambda s: s.ssh_key.fingerprint, "api-v1:api-keys": lambda s: s.api_key.prefix,
    "api-v1:webhooks": lambda s: s.webhook.reference, "api-v1:usage": lambda s: s.org.slug,
    "api-v1:invoices": lambda s: s.invoice.number,
}
# A list B has no object for: what it answers instead (docs/api.md, "Who may do what").
WITHOUT_OWN = {"api-v1:customers": 403}  # only a reseller has customers

# Not organisation-scoped: the same for every key; B is answered normally.
NOT_SCOPED = {
    "api-v1:catalog": ("get", None),  # the public catalog and prices
    "api-v1:estimates": ("post", {"model": "llama-3.1-8b"}),  # sizing: pure, stores nothing
    "api-v1:recommendations": ("post", {"model": "gpt2-124m", "seq_len": 1024, "options": {"top_n": 1}}),
}


def schema_operations() -> dict[tuple[str, str], dict]:
    """(OpenAPI path, method) -> operation, with the request body's properties under "_fields"."""
    schema = SchemaGenerator().get_schema(request=None, public=True)
    components = schema["components"]["schemas"]
    operations = {}
    for path, methods in schema["paths"].items():
        for method, operation in methods.items():
            body = operation.get("requestBody", {}).get("content", {}).get("application/json", {})
            ref = body.get("schema", {}).get("$ref", "").rsplit("/", 1)[-1]
            operations[(path, method)] = operation | {
                "_fields": set(components.get(ref, {}).get("properties", {}))}
    return operations


def openapi_path(route: Route) -> str:
    return route.path({name: "{" + name + "}" for _, name in route.parameters})


def methods(route: Route) -> list[str]:
    view = route.view_class
    return [m for m in ("get", *UNSAFE) if view is not None and hasattr(view, m)]


def query_parameters(operations, route: Route) -> set[str]:
    op = operations.get((openapi_path(route), "get"), {})
    return {p["name"] for p in op.get("parameters", []) if p["in"] == "query"}


def body_fields(operations, route: Route) -> set[str]:
    return operations.get((openapi_path(route), "post"), {}).get("_fields", set())


def filled(route: Route, sides: list[Side]) -> list[tuple[Side, str]]:
    """(the side of A that owns them, the path) for each way to fill ``route`` with A's."""
    out = []
    for side in sides:
        values = [FILL[key](side) for key in route.parameters]
        for combination in itertools.product(*values):
            path = route.path({name: v for (_, name), v in zip(route.parameters, combination,
                                                                 strict=True)})
            match = resolve(path)
            assert f"api-v1:{match.url_name}" == route.name, (path, match.url_name)  # no other route
            out.append((side, path))
    return out


def key_client(plaintext: str) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Api-Key {plaintext}")
    return client


def _call(client, method: str, path: str, body=None):
    return getattr(client, method)(path, body if body is not None else {}, format="json")


# --- the walk knows every route -----------------------------------------------------------------
def test_the_walk_knows_every_route():
    operations = schema_operations()
    unknown = []
    for route in ROUTES:
        if "(regex)" in route.route:
            unknown.append(f"{route.name}: a regex route cannot be filled")
        for key in route.parameters:
            if key not in FILL:
                unknown.append(f"{route.name}: no filler for parameter {key}")
        query = query_parameters(operations, route) - set(QUERY_FILL) - QUERY_NAMES_NOTHING
        if query:
            unknown.append(f"{route.name}: query parameters {sorted(query)} not classified")
        fields = body_fields(operations, route)
        unclassified = fields - set(BODY_FILL) - BODY_NAMES_NOTHING
        if unclassified and route.name not in NOT_SCOPED:
            unknown.append(f"{route.name}: body fields {sorted(unclassified)} not classified")
        if not route.parameters and route.name not in NOT_SCOPED:
            if "get" in methods(route) and route.name not in OWN:
                unknown.append(f"{route.name}: a list without an entry in OWN")
            for name in sorted(fields & set(BODY_FILL)):
                if (route.name, name) not in CREATE_NAMING:
                    unknown.append(f"{route.name}: a create naming {name!r} without a body in CREATE_NAMING")
        if not methods(route):
            unknown.append(f"{route.name}: answers no method the walk knows")
    assert not unknown, "\n".join(unknown)
    names = {route.name for route in ROUTES}
    stale = (set(NOT_SCOPED) | set(OWN) | set(NO_CONTROL) | {n for n, _ in CREATE_NAMING}) - names
    assert not stale, f"entries for routes that no longer exist: {stale}"


# --- the walk -----------------------------------------------------------------------------------
def test_a_strangers_key_reads_nothing_of_a(tenancy_world, stranger):
    operations = schema_operations()
    client, hidden = key_client(stranger.key_plaintext), tenancy_world.a_markers()
    before, wrong, walked = snapshot(), [], {"one": 0, "list": 0, "filtered list": 0, "not scoped": 0}
    for route in ROUTES:
        if "get" not in methods(route):
            continue
        if route.name in NOT_SCOPED:
            continue
        if route.parameters:
            paths = filled(route, tenancy_world.a)
            if not paths:
                wrong.append(f"{route.name}: no object of A fills {route.route}")
            for _, path in paths:
                walked["one"] += 1
                response = client.get(path)
                leaked = names_of_a(response, hidden, path)
                if response.status_code != 404 or leaked:
                    wrong.append(f"GET {path}: {response.status_code}, names {leaked}: "
                                 f"{response.content[:200]!r}")
            continue
        path = route.path({})
        walked["list"] += 1
        response = client.get(path)
        own = OWN[route.name](stranger)
        expected = 200 if own is not None else WITHOUT_OWN.get(route.name, 200)
        leaked = names_of_a(response, hidden, path)
        if response.status_code != expected or leaked:
            wrong.append(f"GET {path}: {response.status_code} (expected {expected}), names {leaked}")
        elif own is not None and own not in response.content.decode():
            wrong.append(f"GET {path}: B's own {own} is not listed: {response.content[:300]!r}")
        for name in sorted(query_parameters(operations, route) & set(QUERY_FILL)):
            for side in tenancy_world.a:
                for value in QUERY_FILL[name](side):
                    walked["filtered list"] += 1
                    response = client.get(path, {name: value})
                    leaked = names_of_a(response, hidden, value)
                    if response.status_code not in (expected, 404) or leaked:
                        wrong.append(f"GET {path}?{name}={value}: {response.status_code}, names {leaked}")
    assert not wrong, "\n".join(wrong)
    assert changed(before, snapshot()) == []
    assert walked["one"] >= 20 and walked["list"] >= 8, walked


def test_a_strangers_key_changes_nothing_of_a(tenancy_world, stranger):
    operations = schema_operations()
    client, hidden = key_client(stranger.key_plaintext), tenancy_world.a_markers()
    before, wrong, walked = snapshot(), [], 0
    for route in ROUTES:
        if route.name in NOT_SCOPED:
            continue
        unsafe = [m for m in methods(route) if m != "get"]
        calls = []
        if route.parameters:
            calls = [(method, path, None, "") for _, path in filled(route, tenancy_world.a)
                     for method in unsafe]
        elif "post" in unsafe:
            for name in sorted(body_fields(operations, route) & set(BODY_FILL)):
                calls += [("post", route.path({}), CREATE_NAMING[(route.name, name)](value), name)
                          for side in tenancy_world.a for value in BODY_FILL[name](side)]
        for method, path, body, named in calls:
            walked += 1
            response = _call(client, method, path, body)
            sent = path + repr(body)
            leaked = names_of_a(response, hidden, sent)
            if body is None:
                ok = response.status_code == 404
            else:  # a create naming A's: "No customer … of yours", "No quote … of yours"
                ok = response.status_code == 400 and named in response.json().get("errors", {})
            if not ok or leaked:
                wrong.append(f"{method.upper()} {path} {body or ''}: {response.status_code}, names {leaked}: "
                             f"{response.content[:200]!r}")
            if moved := changed(before, snapshot()):
                wrong.append(f"{method.upper()} {path}: changed {moved}")
                before = snapshot()
    assert not wrong, "\n".join(wrong)
    assert walked >= 20, walked


def test_the_routes_that_are_no_tenants_answer_a_stranger(tenancy_world, stranger):
    client = key_client(stranger.key_plaintext)
    for name, (method, body) in NOT_SCOPED.items():
        [route] = [r for r in ROUTES if r.name == name]
        response = _call(client, method, route.path({}), body)
        assert response.status_code == 200, (name, response.content[:300])


def test_a_own_keys_reach_every_object_the_walk_fills(tenancy_world):
    """The control: the identifiers the walk uses are real, each reached by its own side's key."""
    operations = schema_operations()
    keys = {side.org.pk: key_client(side.key_plaintext) for side in tenancy_world.a}
    wrong = []
    for route in ROUTES:
        if route.name in NOT_SCOPED:
            continue
        if route.parameters:
            for side, path in filled(route, tenancy_world.a):
                client = keys[side.org.pk]
                for method in methods(route):
                    if method == "get":
                        response = client.get(path)
                        if response.status_code != 200 and route.name not in NO_CONTROL:
                            wrong.append(f"GET {path}: {response.status_code} {response.content[:200]!r}")
                    else:
                        response = undone(_call, client, method, path)
                        if response.status_code == 404:
                            wrong.append(f"{method.upper()} {path}: 404 for its own organisation")
        elif "post" in methods(route):
            for name in sorted(body_fields(operations, route) & set(BODY_FILL)):
                for side in tenancy_world.a:
                    for value in BODY_FILL[name](side):
                        body = CREATE_NAMING[(route.name, name)](value)
                        response = undone(_call, keys[side.org.pk], "post", route.path({}), body)
                        if response.status_code != 201:
                            wrong.append(f"POST {route.path({})} {body}: {response.status_code} "
                                         f"{response.content[:200]!r}")
    assert not wrong, "\n".join(wrong)
