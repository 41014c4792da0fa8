"""PostgreSQL timestamps parsed by psycopg's C loader.

Django reads ``timestamptz`` with a loader of its own that subclasses psycopg's pure-Python one
(to give each value the connection's tzinfo), so even with psycopg's C extension installed every
timestamp is parsed in Python: ~7 µs a value, half the time of reading a page of 10 orders with
their three timestamps each (docs/operations.md, "API throughput"). ``use_c_timestamp_loader``
registers, on each new connection, a loader that parses with the C loader and then sets the same
tzinfo as Django's, so values are equal and carry the same tzinfo object.
"""

from __future__ import annotations

from functools import cache

from psycopg.adapt import AdaptersMap, Loader
from psycopg.postgres import types
from psycopg.types.datetime import TimestamptzLoader

TIMESTAMPTZ_OID = types["timestamptz"].oid


def _c_loader() -> type | None:
    """psycopg's C timestamptz loader (an AdaptersMap registers it for the Python one when the
    extension is installed); None without the extension."""
    probe = AdaptersMap()
    probe.register_loader(TIMESTAMPTZ_OID, TimestamptzLoader)
    loader = probe.get_loader(TIMESTAMPTZ_OID, TimestamptzLoader.format)
    return None if loader is TimestamptzLoader else loader


C_TIMESTAMPTZ_LOADER = _c_loader()


@cache
def loader_for(tz) -> type[Loader]:
    """A loader of timestamptz in ``tz``, the way Django's is (``timezone`` is what Django's
    cursors compare before they register their own)."""
    parse_class = C_TIMESTAMPTZ_LOADER

    class CTimestamptzLoader(Loader):
        timezone = tz

        def __init__(self, oid, context=None):
            super().__init__(oid, context)
            self._parse = parse_class(oid, context).load

        def load(self, data):
            value = self._parse(data)  # in the session's zone, which Django sets to tz
            return value if value.tzinfo is tz else value.replace(tzinfo=tz)

    return CTimestamptzLoader


def use_c_timestamp_loader(sender, connection, **kwargs) -> None:
    """``connection_created`` receiver: PostgreSQL connections read timestamps in C."""
    if connection.vendor != "postgresql" or C_TIMESTAMPTZ_LOADER is None:
        return
    connection.connection.adapters.register_loader("timestamptz", loader_for(connection.timezone))
