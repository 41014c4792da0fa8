"""A NUL byte (or another control character) anywhere in a request is a 400, never a 500 from
PostgreSQL, and under /api/ the 400 is the API's problem+json."""

import pytest
from django.test import Client

from portal.orders.models import Order
from tests.factories import verified_login

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize("path", [
    "/orders/%00/", "/orders/a%00b/server/", "/configure/quotes/%00/", "/ops/approvals/",
    "/ops/nodes/?state=%00", "/catalog/?q=%01",
])
def test_a_nul_in_a_page_address_is_a_400_page(people, require_postgres, path):
    client = Client(raise_request_exception=False)
    verified_login(client, people.sam)
    response = client.get(path + ("%00" if path == "/ops/approvals/" else ""))
    assert response.status_code in (400, 404)
    if response.status_code == 400:
        assert b"could not be read" in response.content


def test_api_quote_with_a_nul_reference_is_a_json_400(people, require_postgres):
    client = Client(raise_request_exception=False)
    client.force_login(people.rita)
    response = client.get("/api/v1/quotes/%00")
    assert response.status_code == 400
    assert response["Content-Type"] == "application/problem+json"
    assert "control characters" in response.json()["detail"]


def test_a_nul_in_a_form_field_changes_nothing(people, catalog, require_postgres):
    from tests.factories import submitted_order

    order = submitted_order(people)
    client = Client(raise_request_exception=False)
    verified_login(client, people.sam)
    response = client.post(f"/ops/approvals/{order.reference}/reject/", {"reason": "no\x00stock"})
    assert response.status_code == 400
    assert Order.objects.get(pk=order.pk).state == order.state


def test_tabs_and_newlines_in_a_text_area_are_fine(people, require_postgres):
    client = Client(raise_request_exception=False)
    client.force_login(people.alice)
    assert client.get("/catalog/", {"q": "line\tone\r\nline two"}).status_code == 200
