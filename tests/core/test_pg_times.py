"""PostgreSQL timestamps are parsed by psycopg's C loader and read as Django reads them: the same
instant, with the connection's tzinfo object, whatever offset the database wrote."""

import datetime

import pytest
from django.db import connection
from psycopg.types.datetime import TimestamptzLoader

from portal.core.pg_times import C_TIMESTAMPTZ_LOADER, TIMESTAMPTZ_OID, loader_for

pytestmark = [pytest.mark.django_db,
              pytest.mark.skipif(connection.vendor != "postgresql", reason="PostgreSQL's timestamptz")]

TEXTS = ["2026-12-04 02:07:37.847968+00", "2026-01-01 10:00:00+05:30", "1999-12-31 23:59:59.000001-08",
         "2026-06-30 12:00:00+00"]


def _read(sql: str, params=()) -> list:
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return [row[0] for row in cursor.fetchall()]


def test_new_connections_read_timestamps_with_the_c_loader():
    if C_TIMESTAMPTZ_LOADER is None:
        pytest.fail("psycopg's C extension (psycopg[binary]) is a pinned dependency; it is missing")
    connection.ensure_connection()
    loader = connection.connection.adapters.get_loader(TIMESTAMPTZ_OID, TimestamptzLoader.format)
    assert loader is loader_for(connection.timezone)
    assert loader.timezone is connection.timezone  # what Django's cursors compare


def test_values_are_the_instants_written_with_djangos_tzinfo():
    ours = _read("SELECT t::timestamptz FROM unnest(%s::text[]) AS t", [TEXTS])
    utc = datetime.UTC
    assert ours == [datetime.datetime(2026, 12, 4, 2, 7, 37, 847968, tzinfo=utc),
                    datetime.datetime(2026, 1, 1, 4, 30, tzinfo=utc),
                    datetime.datetime(2000, 1, 1, 7, 59, 59, 1, tzinfo=utc),
                    datetime.datetime(2026, 6, 30, 12, 0, tzinfo=utc)]
    assert all(value.tzinfo is connection.timezone for value in ours)


def test_they_equal_what_djangos_own_loader_reads():
    from django.db.backends.postgresql.psycopg_any import register_tzloader

    ours = _read("SELECT t::timestamptz FROM unnest(%s::text[]) AS t", [TEXTS])
    with connection.cursor() as cursor:
        register_tzloader(connection.timezone, cursor.cursor)  # Django's, on this cursor only
        cursor.execute("SELECT t::timestamptz FROM unnest(%s::text[]) AS t", [TEXTS])
        djangos = [row[0] for row in cursor.fetchall()]
    assert ours == djangos and [v.tzinfo for v in ours] == [v.tzinfo for v in djangos]
