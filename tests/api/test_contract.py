"""The API against its own live OpenAPI schema (schemathesis): for every read endpoint and every
creating POST that honours `Idempotency-Key`, generated requests get no 5xx and every answer
(status code, content type, body, headers) conforms to the schema. A reseller's key, with a
customer, quotes and an order, so reads find real objects as well as unknown ones."""

import pytest
import schemathesis
from django.core import signals
from django.db import close_old_connections
from hypothesis import HealthCheck, Phase
from hypothesis import settings as hypothesis_settings
from schemathesis import checks as st

from tests.api.conftest import key_client
from tests.factories import L4_SKU, make_order, make_quote

# Read endpoints (GET, and the sizing POSTs that create nothing) and the idempotent creates.
OPERATIONS = [
    "catalog_retrieve", "estimates_create", "recommendations_create",
    "quotes_list", "quotes_create", "quotes_retrieve",
    "orders_list", "orders_create", "orders_retrieve", "orders_events_list", "servers_retrieve",
    "customers_list", "customers_create", "customers_retrieve",
    "webhooks_list", "webhooks_create", "webhooks_retrieve", "webhooks_deliveries",
    "webhooks_rotate_secret", "api_keys_list", "api_keys_create", "api_keys_rotate",
]


def _live_schema():
    """What GET /api/schema/ serves (no database needed), restricted to OPERATIONS."""
    from portal.wsgi import application

    loaded = schemathesis.openapi.from_wsgi("/api/schema/", application)
    found = {result.ok().definition.raw.get("operationId") for result in loaded.get_all_operations()}
    assert not set(OPERATIONS) - found, f"operations gone from the schema: {set(OPERATIONS) - found}"
    return loaded.include(operation_id=OPERATIONS)


schema = _live_schema()
# No 5xx, and every answer as documented. Not `positive_data_acceptance`: a schema-valid request
# may still break a business rule (an unknown model preset, a quote already ordered) and get a
# documented 400/409; nor `negative_data_rejection`: an empty optional query filter means "no
# filter", as in an HTML form.
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


@pytest.fixture
def reseller_key(people, catalog, settings, keep_test_connection):
    settings.REST_FRAMEWORK = {**settings.REST_FRAMEWORK,
                               "DEFAULT_THROTTLE_RATES": {"api": "100000/min"}}
    make_quote(people.client_org, sku=L4_SKU, network="eth-1g", nvme="nvme-1tb-single")
    make_order(people.client_org, sku=L4_SKU, network="eth-1g", nvme="nvme-1tb-single")
    return key_client(people.reseller)


@schema.parametrize()
@hypothesis_settings(max_examples=6, deadline=None, derandomize=True,
                     phases=[Phase.explicit, Phase.generate],
                     suppress_health_check=list(HealthCheck))
def test_the_api_keeps_its_contract(case, reseller_key):
    auth = reseller_key._credentials["HTTP_AUTHORIZATION"]
    case.call_and_validate(headers={"Authorization": auth}, checks=CHECKS)
