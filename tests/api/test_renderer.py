"""The API's JSON renderer (orjson) writes what DRF's JSONRenderer writes for the API's data, and
falls back to it for what orjson refuses and for indented answers."""

import datetime
import decimal
import json
import uuid

from django.utils.translation import gettext_lazy
from rest_framework.renderers import JSONRenderer
from rest_framework.utils.serializer_helpers import ReturnDict, ReturnList

from portal.api.renderers import FastJSONRenderer

UTC = datetime.UTC
DATA = {
    "text": "Llama 3.1 70B — 8× H100 ✓", "int": 7, "float": 0.45, "small": 1e-7, "none": None,
    "bool": True, "list": [1, "a", None], 3: "an int key", "decimal": decimal.Decimal("23.60"),
    "uuid": uuid.UUID("12345678-1234-5678-1234-567812345678"), "lazy": gettext_lazy("Draft"),
    "at": datetime.datetime(2026, 12, 4, 2, 7, 37, 847968, tzinfo=UTC),
    "whole": datetime.datetime(2026, 12, 4, 2, 7, 37, tzinfo=UTC),
    "offset": datetime.datetime(2026, 1, 1, 10, 0, tzinfo=datetime.timezone(datetime.timedelta(hours=5.5))),
    "day": datetime.date(2026, 12, 4), "span": datetime.timedelta(hours=1.5),
    "nested": ReturnDict({"rows": ReturnList([{"a": 1}], serializer=None)}, serializer=None),
}


def _both(data):
    return FastJSONRenderer().render(data), JSONRenderer().render(data)


def test_it_writes_the_same_json_as_drfs_renderer():
    ours, drfs = _both(DATA)
    assert json.loads(ours) == json.loads(drfs)
    for key in ("at", "whole", "offset", "day"):  # times as DRF writes them (…Z for UTC)
        assert f'"{key}":{json.dumps(json.loads(drfs)[key])}'.encode() in ours
    assert b'"at":"2026-12-04T02:07:37.847968Z"' in ours


def test_what_orjson_refuses_is_drfs_to_render_or_refuse():
    ours, drfs = _both({"big": 2**70})
    assert ours == drfs == b'{"big":1180591620717411303424}'
    aware = datetime.time(10, 0, tzinfo=UTC)
    for renderer in (FastJSONRenderer(), JSONRenderer()):
        try:
            renderer.render({"t": aware})
        except ValueError as exc:
            assert "timezone-aware" in str(exc)
        else:
            raise AssertionError("an aware time rendered")


def test_an_indented_answer_is_drfs():
    ours = FastJSONRenderer().render(DATA, "application/json; indent=4")
    assert ours == JSONRenderer().render(DATA, "application/json; indent=4") and b"\n    " in ours
    assert FastJSONRenderer().render(None) == b""
