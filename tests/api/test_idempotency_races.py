"""Two identical create calls at the same moment with one Idempotency-Key (PostgreSQL, two
threads, two connections): one object is created and both callers get its answer."""

import threading

import pytest
from django.db import connection

from portal.accounts.models import Organisation
from portal.api.models import IdempotencyKey
from portal.quotes.models import Quote
from portal.webhooks.models import WebhookEndpoint
from tests.api.conftest import key_client
from tests.factories import L4_SKU

CASES = {
    "customers": ("/api/v1/customers", {"name": "Race Labs"},
                  lambda: Organisation.objects.filter(name="Race Labs").count()),
    "quotes": ("/api/v1/quotes", {"sku": L4_SKU, "customer": "resale-client"},
               lambda: Quote.objects.count()),
    "webhooks": ("/api/v1/webhooks", {"url": "https://hooks.example.com/race"},
                 lambda: WebhookEndpoint.objects.count()),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_two_concurrent_identical_creates_make_one_object(people, catalog, transactional_db,
                                                          require_postgres, case):
    path, body, count = CASES[case]
    client = key_client(people.reseller)
    barrier, responses = threading.Barrier(2), []

    def post():
        try:
            barrier.wait()
            responses.append(client.post(path, body, format="json", HTTP_IDEMPOTENCY_KEY=f"race-{case}"))
        finally:
            connection.close()

    threads = [threading.Thread(target=post) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert [r.status_code for r in responses] == [201, 201], [r.content for r in responses]
    assert responses[0].json() == responses[1].json()
    assert sorted(r.get("Idempotent-Replayed", "") for r in responses) == ["", "true"]
    assert count() == 1 and IdempotencyKey.objects.count() == 1
