"""The API's JSON renderer (orjson) writes the bytes DRF's JSONRenderer writes for the API's
answers, the same JSON where it writes a float's exponent its own way, and leaves to DRF what
orjson refuses and indented answers."""

import datetime
import decimal
import json
import uuid

from django.utils.translation import gettext_lazy
from rest_framework.renderers import JSONRenderer
from rest_framework.utils.serializer_helpers import ReturnDict, ReturnList

from portal.api.renderers import FastJSONRenderer
from tests.api.conftest import key_client
from tests.factories import make_order

UTC = datetime.UTC
DATA = {
    "text": "Llama 3.1 70B — 8× H100 ✓ \u2028 \u2029", "int": 7, "float": 0.45, "none": None,
    "bool": True, "list": [1, "a", None], 3: "an int key", "decimal": decimal.Decimal("23.60"),
    "uuid": uuid.UUID("12345678-1234-5678-1234-567812345678"), "lazy": gettext_lazy("Draft"),
    "at": datetime.datetime(2026, 12, 4, 2, 7, 37, 847968, tzinfo=UTC),
    "whole": datetime.datetime(2026, 12, 4, 2, 7, 37, tzinfo=UTC),
    "offset": datetime.datetime(2026, 1, 1, 10, 0, tzinfo=datetime.timezone(datetime.timedelta(hours=5.5))),
    "day": datetime.date(2026, 12, 4), "span": datetime.timedelta(hours=1.5),
    "nested": ReturnDict({"rows": ReturnList([{"a": 1}], serializer=None)}, serializer=None),
}


def test_it_writes_drfs_bytes():
    ours = FastJSONRenderer().render(DATA)
    assert ours == JSONRenderer().render(DATA)
    assert b'"at":"2026-12-04T02:07:37.847968Z"' in ours and b"\\u2028 \\u2029" in ours


def test_the_apis_answers_are_drfs_bytes(people, catalog):
    api = key_client(people.reseller)
    order = make_order(people.client_org)
    paths = ["/api/v1/catalog", "/api/v1/orders", f"/api/v1/orders/{order.reference}",
             f"/api/v1/quotes/{order.quote.reference}", "/api/v1/customers", "/api/v1/orders/O-NOPE0000"]
    for path in paths:
        response = api.get(path)
        assert response.content == JSONRenderer().render(response.data), path
    estimate = api.post("/api/v1/estimates", {"model": "llama-3.1-8b"}, format="json")
    assert estimate.status_code == 200  # floats: the same numbers, an exponent perhaps written otherwise
    assert json.loads(estimate.content) == json.loads(JSONRenderer().render(estimate.data))


def test_a_floats_exponent_is_the_same_number():
    data = {"small": 1e-7, "large": 1e16, "plain": 0.1 + 0.2}
    assert json.loads(FastJSONRenderer().render(data)) == data


def test_what_orjson_refuses_is_drfs_to_render_or_refuse():
    ours = FastJSONRenderer().render({"big": 2**70})
    assert ours == JSONRenderer().render({"big": 2**70}) == b'{"big":1180591620717411303424}'
    aware = datetime.time(10, 0, tzinfo=UTC)
    for renderer in (FastJSONRenderer(), JSONRenderer()):
        try:
            renderer.render({"t": aware})
        except ValueError as exc:
            assert "timezone-aware" in str(exc)
        else:
            raise AssertionError("an aware time rendered")


def test_an_indented_or_ascii_answer_is_drfs():
    ours = FastJSONRenderer().render(DATA, "application/json; indent=4")
    assert ours == JSONRenderer().render(DATA, "application/json; indent=4") and b"\n    " in ours
    ascii_only = FastJSONRenderer()
    ascii_only.ensure_ascii = True
    assert ascii_only.render(DATA) == json.dumps(DATA, cls=JSONRenderer.encoder_class, separators=(",", ":"),
                                                 allow_nan=False).encode()
    assert FastJSONRenderer().render(None) == b""
