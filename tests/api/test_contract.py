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
from schemathesis import checks as st

from portal.accounts.services import api_key_issue, ssh_key_add
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
# No 5xx, and every answer as documented. Not `positive_data_acceptance`: a schema-valid request
# may still break a business rule the schema cannot state (a slug or key already taken, a batch
# that is not a multiple of the sequence) and get a documented 400/409. Nor
# `negative_data_rejection`: DRF's fields take a number where the schema says string, and the
# check also fails operations it could not make a bad request for ("default positive test
# case"). The mismatches it found that the schema or the API could state are fixed and tested
# one by one in test_schema_agrees.py.
CHECKS = [st.not_a_server_error, st.status_code_conformance, st.content_type_conformance,
          st.response_headers_conformance, st.response_schema_conformance]


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


@schema.parametrize()
@hypothesis_settings(max_examples=5, deadline=None, derandomize=True,
                     phases=[Phase.explicit, Phase.generate],
                     suppress_health_check=list(HealthCheck))
def test_the_api_keeps_its_contract(case, reseller_key):
    client, targets = reseller_key
    if case.path_parameters:
        _seen[(case.method, case.path)] += 1
        if _seen[(case.method, case.path)] % 2:  # every other request names a real object
            case.path_parameters = {**case.path_parameters, **targets.path_parameters(case)}
    headers = {"Authorization": client._credentials["HTTP_AUTHORIZATION"]}
    if "Idempotency-Key" in (case.headers or {}):
        # Generated keys repeat ('0') across different bodies: a documented 422 each time, which
        # would hide what the call does. The key's own rules: tests/api/test_idempotency_api.py.
        headers["Idempotency-Key"] = str(uuid.uuid4())
    case.call_and_validate(headers=headers, checks=CHECKS)


def test_every_operation_is_in_the_contract():
    """Nothing left out: the schema lists every endpoint (test_schema.PATHS), all run above."""
    from tests.api.test_schema import PATHS

    paths = {result.ok().path for result in schema.get_all_operations()}
    assert paths == set(PATHS)
