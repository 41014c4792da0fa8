"""The API against its own live OpenAPI schema (schemathesis): every operation, reads and writes
(PATCH, DELETE, cancel, terminate, reboot, re-deploy, revoke, rotate, SSH keys, the webhook test
event, the bucket key, stack files), gets no 5xx and answers (status code, content type, body,
headers) as the schema says.

A reseller's key, with a customer, quotes and orders. Every other generated request that names
an object is pointed at a fresh real one of the right kind and state (made for that request, so
a DELETE or a revoke does not starve the next one); the rest keep the generated names and must
get a documented 404. The schema's request examples are sent first, so creates also succeed."""

import uuid
from collections import Counter

import pytest
import schemathesis
from django.core import signals
from django.db import close_old_connections
from hypothesis import HealthCheck, Phase
from hypothesis import settings as hypothesis_settings
from schemathesis.checks import CHECKS as CHECKS_REGISTRY
from schemathesis.checks import load_all_checks
from schemathesis.core.failures import FailureGroup
from schemathesis.core.parameters import ParameterLocation
from schemathesis.openapi.checks import RejectedPositiveData

from portal.accounts.services import api_key_issue, ssh_key_add
from portal.core.middleware import CONTROL_CHARACTERS
from portal.core.middleware import MESSAGE as CONTROL_MESSAGE
from portal.core.text import hidden_text_problem
from portal.orders.states import OrderState
from portal.webhooks.services import endpoint_create
from tests.accounts.ssh_keygen import new_public_key
from tests.api.conftest import key_client
from tests.factories import L4_SKU, make_node, make_order, make_quote

SMALL = {"sku": L4_SKU, "network": "eth-1g", "nvme": "nvme-1tb-single"}


def _live_schema():
    """What GET /api/schema/ serves (no database needed): every operation."""
    from portal.wsgi import application

    return schemathesis.openapi.from_wsgi("/api/schema/", application)


schema = _live_schema()
# Every check schemathesis has. Two stateful ones (use_after_free, ensure_resource_availability)
# and object_level_authorization judge sequences of calls and a second identity; here each case is
# one call by one key, so they have nothing to judge and pass (tenant isolation has its own 404
# tests per endpoint).
load_all_checks()
CHECKS = CHECKS_REGISTRY.get_all()

# Invisible and direction-changing characters (Unicode categories Cf, Cc, Co, Cs, Zl, Zp: the
# parser's rule, portal.core.text) in any key or string are a 400 naming the field; a regular
# expression for those categories has no syntax that every OpenAPI 3.0 tool reads.
HIDDEN_TEXT = hidden_text_problem("\u200b").split("(")[0]

# Schema-valid requests the API refuses (positive_data_acceptance) for a rule no JSON Schema can
# state: a rule between fields (global_batch_tokens a multiple of seq_len; tp dividing the model's
# heads; a quote or a configuration; a write key without read), a name that must be of an object
# that exists (a customer, a catalog row, a model preset), or a check narrower than a type (an
# OpenSSH key line; Django's URL validator for `format: uri`; what a Hugging Face config.json or
# a stored plan must hold). Accepted only as a 400 problem whose `errors` name nothing but these
# fields; any other refusal of valid data fails.
CATALOG = ("sku", "nvme", "network", "storage_provider", "strategy", "tracker")  # rows by slug
SIZING = ("model", "hf_config")  # a preset that exists; what a config.json must say
BUSINESS_RULES = {
    "POST /api/v1/estimates": {"non_field_errors", *SIZING, "plan", "sku", "gpu", "network"},
    "POST /api/v1/recommendations": {"non_field_errors", *SIZING},
    "POST /api/v1/quotes": {"customer", *CATALOG, "storage_custom"},
    "POST /api/v1/orders": {"non_field_errors", "customer", "quote",
                            *(f"configuration.{name}" for name in (*CATALOG, "storage_custom"))},
    "POST /api/v1/api-keys": {"non_field_errors"},
    "POST /api/v1/ssh-keys": {"customer", "public_key"},
    "POST /api/v1/webhooks": {"url"},
    "PATCH /api/v1/webhooks/{reference}": {"url"},
    "GET /api/v1/usage": {"customer"},
}


def _errors(errors: dict, prefix: str = "") -> dict[str, list]:
    """{"configuration.storage_provider": [...]} for {"configuration": {"storage_provider": [...]}}."""
    leaves: dict[str, list] = {}
    for name, value in errors.items():
        if isinstance(value, dict):
            leaves |= _errors(value, f"{prefix}{name}.")
        else:
            leaves[f"{prefix}{name}"] = value
    return leaves


def _a_rule_the_schema_cannot_state(case, response) -> bool:
    if response.status_code != 400:
        return False
    problem = response.json()
    if problem.get("detail") == CONTROL_MESSAGE:
        # Every string and parameter the schema names states it with a pattern; OpenAPI 3.0
        # cannot for an object's free keys (no propertyNames) and what they hold.
        return _control_character_in(case.body)
    errors = _errors(problem.get("errors") or {})
    allowed = BUSINESS_RULES.get(case.operation.label, set())
    return bool(errors) and all(
        any(field == rule or field.startswith(f"{rule}.") for rule in allowed)
        or all(str(message).startswith(HIDDEN_TEXT) for message in messages)
        for field, messages in errors.items())


def _control_character_in(value) -> bool:
    if isinstance(value, str):
        return bool(CONTROL_CHARACTERS.search(value))
    if isinstance(value, dict):
        return any(_control_character_in(k) or _control_character_in(v) for k, v in value.items())
    if isinstance(value, list):
        return any(_control_character_in(v) for v in value)
    return False


@pytest.fixture
def keep_test_connection():
    """The WSGI app closes the database connection after each request; the test's transaction
    lives on it (Django's test client disconnects the same handlers)."""
    signals.request_started.disconnect(close_old_connections)
    signals.request_finished.disconnect(close_old_connections)
    yield
    signals.request_started.connect(close_old_connections)
    signals.request_finished.connect(close_old_connections)


class Targets:
    """Makes a fresh real object for the operation a generated request names."""

    def __init__(self, people, sim_dir):
        self.people, self.sim_dir = people, sim_dir

    def order_state(self, path: str) -> str:
        if path.endswith("/cancel"):
            return OrderState.PENDING_APPROVAL
        return OrderState.ACTIVE

    def path_parameters(self, case) -> dict:
        path, org = case.path, self.people.client_org
        if path.startswith("/api/v1/quotes/"):
            return {"reference": make_quote(org, **SMALL).reference}
        if path.startswith("/api/v1/orders/"):
            order = make_order(org, state=self.order_state(path), **SMALL)
            if "/server" in path:
                node = make_node(sku=L4_SKU, state_dir=self.sim_dir, state="active")
                node.order = order
                node.save(update_fields=["order"])
                return {"reference": order.reference, "hostname": node.hostname, "name": "env.sh"}
            return {"reference": order.reference}
        if path.startswith("/api/v1/webhooks/"):
            return {"reference": endpoint_create(organisation=org, url="https://hooks.example.com/in")[0]
                    .reference}
        if path.startswith("/api/v1/customers/"):
            return {"slug": org.slug}
        if path.startswith("/api/v1/ssh-keys/"):
            return {"key_id": ssh_key_add(public_key=new_public_key(), organisation=org).pk}
        if path.startswith("/api/v1/api-keys/"):
            return {"prefix": api_key_issue(organisation=self.people.reseller, name="target").api_key.prefix}
        return {}


@pytest.fixture
def reseller_key(people, catalog, settings, sim_dir, keep_test_connection):
    settings.REST_FRAMEWORK = {**settings.REST_FRAMEWORK,
                               "DEFAULT_THROTTLE_RATES": {"api": "100000/min"}}
    make_quote(people.client_org, **SMALL)
    make_order(people.client_org, **SMALL)
    return key_client(people.reseller), Targets(people, sim_dir)


_seen: Counter = Counter()


def _negative_at(case, location) -> bool:
    """A value made to break the schema there is sent as it is: the API must refuse it."""
    return case.meta is not None and case.meta.is_negative_at(location)



@schema.parametrize()
@hypothesis_settings(max_examples=5, deadline=None, derandomize=True, database=None,
                     phases=[Phase.explicit, Phase.generate],
                     suppress_health_check=list(HealthCheck))
def test_the_api_keeps_its_contract(case, reseller_key):
    client, targets = reseller_key
    if case.path_parameters and not _negative_at(case, ParameterLocation.PATH):
        _seen[(case.method, case.path)] += 1
        if _seen[(case.method, case.path)] % 2:  # every other request names a real object
            real = targets.path_parameters(case)
            case.path_parameters = {name: real.get(name, value)
                                    for name, value in case.path_parameters.items()}
    headers = {"Authorization": client._credentials["HTTP_AUTHORIZATION"]}
    if "Idempotency-Key" in (case.headers or {}) and not _negative_at(case, ParameterLocation.HEADER):
        # Generated keys repeat ('0') across different bodies: a documented 422 each time, which
        # would hide what the call does. The key's own rules: tests/api/test_idempotency_api.py.
        case.headers["Idempotency-Key"] = str(uuid.uuid4())
    response = case.call(headers=headers)
    try:
        case.validate_response(response, checks=CHECKS, headers=headers,
                               transport_kwargs={"headers": headers})
    except FailureGroup as group:
        left = [failure for failure in group.exceptions
                if not (isinstance(failure, RejectedPositiveData)
                        and _a_rule_the_schema_cannot_state(case, response))]
        if left:
            raise FailureGroup(left, str(group)) from None


def test_every_operation_is_in_the_contract():
    """Nothing left out: the schema lists every endpoint (test_schema.PATHS), all run above."""
    from tests.api.test_schema import PATHS

    paths = {result.ok().path for result in schema.get_all_operations()}
    assert paths == set(PATHS)
