"""Walks every URL pattern of the URL conf with hostile values in each path parameter and in
the query string, as anonymous, customer, approver and operator: never a 500, and under
/api/ always a JSON answer."""

import re
from urllib.parse import quote

import pytest
from django import forms
from django.test import Client
from django.urls import URLPattern, URLResolver, get_resolver

from tests.factories import UserFactory, make_node, submitted_order, verified_login

HOSTILE = ["\x00", "a\x00b", "x" * 3000, "Zürich-€-😀", "-1", "0", "9" * 40, "1e308", "%", "..",
           "<script>", "' OR 1=1 --"]
# Field values for the query string and form bodies (every field of every form gets one).
HOSTILE_FIELDS = ["\x00", "x" * 3000, "Zürich-€-😀", "-1", "9" * 40, "1e308"]
QUERY_NAMES = ("q", "page", "state", "sku", "go", "run", "reference", "limit", "offset", "cursor",
               "organisation", "kind", "sort")
SKIPPED = ("admin/", "api/schema/", "api/docs/",  # Django's admin; the schema is static
           "accounts/logout/")  # would end the session the walk goes on with


def _patterns(resolver=None, prefix=""):
    resolver = resolver or get_resolver()
    for entry in resolver.url_patterns:
        route = prefix + str(entry.pattern)
        if isinstance(entry, URLResolver):
            yield from _patterns(entry, route)
        elif isinstance(entry, URLPattern):
            yield route


def _routes():
    return [r for r in _patterns() if not r.startswith(SKIPPED)]


PARAM = re.compile(r"<(?:(\w+):)?(\w+)>")


def _fill(route: str, real: dict, hostile_name: str | None, hostile: str) -> str:
    def sub(match):
        name = match.group(2)
        value = hostile if name == hostile_name else real.get(name, "x")
        return quote(value, safe="")
    path = PARAM.sub(sub, route)
    path = path.replace("^", "").replace("$", "")
    path = re.sub(r"\(\?!.*?\)", "", path)  # a negative lookahead (the API's catch-all)
    return "/" + path


def _paths(real: dict) -> list[str]:
    paths = []
    for route in _routes():
        names = [m.group(2) for m in PARAM.finditer(route)]
        if not names:
            paths.append(_fill(route, real, None, ""))
            continue
        for name in names:
            paths += [_fill(route, real, name, value) for value in HOSTILE]
    return paths


@pytest.fixture
def real_values(people, catalog, sim_dir, settings):
    settings.SIMULATED_DRIVER_DELAY_SCALE = 0
    order = submitted_order(people)
    node = make_node(sku=order.sku, state_dir=sim_dir)
    return {"reference": order.reference, "quote_reference": order.quote.reference,
            "slug": people.acme.slug, "pk": str(node.pk), "prefix": "abc", "action": "maintenance"}


def _form_field_names() -> set[str]:
    """Every field name of every form class the URL conf's views import."""
    get_resolver().url_patterns  # noqa: B018 - imports the views, and with them their forms
    names, todo = set(QUERY_NAMES), [forms.BaseForm]
    while todo:
        cls = todo.pop()
        todo.extend(cls.__subclasses__())
        names |= set(getattr(cls, "base_fields", {}))
    return names


def _check(client, method, path, data, who, failures):
    response = getattr(client, method)(path, data)
    label = f"{method.upper()} {path[:80]!r} {str(data)[:60]} as {who or 'anonymous'}"
    if response.status_code >= 500:
        failures.append(f"{label}: {response.status_code}")
    elif path.startswith("/api/") and response.status_code >= 400 and \
            "json" not in response.get("Content-Type", ""):
        failures.append(f"{label}: {response.status_code} not JSON")


ROLES = ("anonymous", "customer", "staff")  # one test each, so a parallel run spreads them


def _client(people, role):
    client = Client(raise_request_exception=False)
    who = None
    if role == "customer":
        who = people.alice
    elif role == "staff":  # approver and operator
        who = UserFactory(username="root", is_staff=True, is_superuser=True)
    if who is not None:
        verified_login(client, who)
    return who, client


@pytest.mark.parametrize("role", ROLES)
@pytest.mark.django_db
def test_no_path_parameter_answers_500(role, people, real_values, require_postgres):
    failures = []
    paths = _paths(real_values)
    assert len(paths) > 200, "the walk found the URL conf"
    who, client = _client(people, role)
    for path in paths:
        for method in ("get", "post"):
            _check(client, method, path, {}, who, failures)
    assert not failures, f"{len(failures)} failures:\n" + "\n".join(failures[:60])


@pytest.mark.parametrize("role", ROLES)
@pytest.mark.django_db
def test_no_query_or_form_field_answers_500(role, people, real_values, require_postgres):
    failures = []
    paths = [_fill(route, real_values, None, "") for route in _routes()]
    names = _form_field_names()
    assert {"hostname", "preset", "note"} <= names, "the walk found the forms"
    who, client = _client(people, role)
    for path in paths:
        for value in HOSTILE_FIELDS:
            data = dict.fromkeys(names, value)
            _check(client, "get", path, data, who, failures)
            _check(client, "post", path, data, who, failures)
    assert not failures, f"{len(failures)} failures:\n" + "\n".join(failures[:60])
