"""Billing at scale: closing a month (drafting every organisation's invoice from the usage
ledger) and the cost so far of a big organisation (the billing page and GET /api/v1/usage).

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/trainyard .venv/bin/python bench/billing_bench.py

Creates a fresh database (BENCH_DB, default ``trainyard_billing_bench``, dropped at the end) on
the server of DATABASE_URL, migrates it, seeds the catalog and fills it through the ORM's bulk
inserts: BENCH_ORGS organisations (1,000) with BENCH_ORDERS_PER_ORG orders (5) of 2 nodes, each
node used in BENCH_SEGMENTS stretches (5) last month: 50,000 usage intervals by default. Then:

- the month close (``portal.billing.invoices.month_close``) run twice: the first drafts every
  invoice, the second finds nothing to change (what each hourly beat costs afterwards); time
  and database queries per invoice;
- the cost so far this month of one organisation with BENCH_BIG_ORDERS (2,000) running orders,
  read BENCH_REPEAT (20) times: median and p95 in ms, and its queries; each of its nodes also
  has BENCH_HISTORY (24) closed intervals in the months before (a reading that depends on the
  history grows with it).

DEBUG is off unless set (a debug cursor logs every query, as production does not).

Tests never assert on speed: this prints numbers for people.
"""

from __future__ import annotations

import contextlib
import os
import statistics
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from urllib.parse import urlparse, urlunparse

REPO = Path(__file__).resolve().parent.parent


def _fail(message: str) -> None:
    print(f"billing_bench: {message}", file=sys.stderr)
    sys.exit(2)


def _psql(admin_url: str, statement: str) -> None:
    import psycopg

    with psycopg.connect(admin_url, autocommit=True) as conn:
        conn.execute(statement)


@contextlib.contextmanager
def _counting(connection):
    """Counts the queries run inside (a one-item list, read after the block)."""
    count = [0]

    def wrapper(execute, sql, params, many, context):
        count[0] += 1
        return execute(sql, params, many, context)

    with connection.execute_wrapper(wrapper):
        yield count


def _orders(org_ids, per_org: int, *, state: str):
    from portal.catalog.models import NetworkOption, NvmeOption, ServerSKU
    from portal.orders.models import Order

    sku = ServerSKU.objects.get(slug="8x-h100-sxm-80gb")
    nvme, network = NvmeOption.objects.first(), NetworkOption.objects.get(slug="ib-ndr-400g")
    rows = [Order(organisation_id=org_id, sku=sku, node_count=2, nvme=nvme, network=network,
                  price_hourly=sku.price_hourly * 2, price_monthly=sku.price_monthly * 2,
                  price_lines=[{"label": sku.name, "hourly": str(sku.price_hourly * 2),
                                "monthly": str(sku.price_monthly * 2)}], state=state)
            for org_id in org_ids for _ in range(per_org)]
    return Order.objects.bulk_create(rows, batch_size=2000)


def _fill(*, orgs: int, per_org: int, segments: int, month_start: datetime) -> int:
    from portal.accounts.models import Organisation
    from portal.billing.models import UsageInterval
    from portal.billing.services import measured_before_set

    created = Organisation.objects.bulk_create(
        [Organisation(name=f"Bench org {n}", slug=f"bench-{n}") for n in range(orgs)],
        batch_size=2000)
    orders = _orders([o.pk for o in created], per_org, state="terminated")
    rows, step = [], timedelta(hours=5)
    for i, order in enumerate(orders):
        start = month_start + timedelta(hours=i % 300)
        for node in (1, 2):
            for s in range(segments):
                begin = start + s * step
                rows.append(UsageInterval(order=order, kind="node", meter=node, label=f"gpu-{node}",
                                          started_at=begin,
                                          ended_at=begin + timedelta(hours=3, minutes=20),
                                          hourly=order.price_hourly, monthly=order.price_monthly,
                                          share=2, opened_by="bench"))
    measured_before_set(rows)
    UsageInterval.objects.bulk_create(rows, batch_size=5000)
    return len(rows)


def _big_org(orders: int, now: datetime, history: int):
    """One organisation with ``orders`` running orders of 2 nodes, each node also used in
    ``history`` closed stretches of 20 h in the months before last (one every 3 days, backwards)."""
    from portal.accounts.models import Organisation
    from portal.billing.models import UsageInterval
    from portal.billing.services import measured_before_set

    org = Organisation.objects.create(name="Big customer", slug="bench-big")
    month_start = now.replace(day=1, hour=0, minute=0, second=0, microsecond=0)
    rows = []
    for i, order in enumerate(_orders([org.pk], orders, state="active")):
        begin = max(now - timedelta(hours=1 + i % 200), month_start)
        for node in (1, 2):
            rows.append(UsageInterval(order=order, kind="node", meter=node, label=f"gpu-{node}",
                                      started_at=begin, hourly=order.price_hourly,
                                      monthly=order.price_monthly, share=2, opened_by="bench"))
            for n in range(1, history + 1):
                past = month_start - timedelta(days=32 + 3 * n, minutes=i % 60)  # before last month
                rows.append(UsageInterval(order=order, kind="node", meter=node, label=f"gpu-{node}",
                                          started_at=past, ended_at=past + timedelta(hours=20),
                                          hourly=order.price_hourly, monthly=order.price_monthly,
                                          share=2, opened_by="bench"))
    measured_before_set(rows)
    UsageInterval.objects.bulk_create(rows, batch_size=5000)
    return org


@contextlib.contextmanager
def seeded_database(default_name: str, **environ: str):
    """A fresh database (BENCH_DB, default ``default_name``) on the server of DATABASE_URL,
    Django set up on it (``environ`` added to its settings' environment), migrated and the
    catalog seeded; dropped afterwards."""
    url = urlparse(os.environ.get("DATABASE_URL", ""))
    if url.scheme not in ("postgres", "postgresql", "pgsql"):
        _fail("needs PostgreSQL: set DATABASE_URL=postgres://postgres@127.0.0.1:5432/trainyard")
    name = os.environ.get("BENCH_DB", default_name)
    admin = urlunparse(url._replace(path="/postgres"))
    _psql(admin, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    _psql(admin, f'CREATE DATABASE "{name}"')
    os.environ.update({"DATABASE_URL": urlunparse(url._replace(path=f"/{name}")),
                       "DJANGO_SETTINGS_MODULE": "portal.settings", "LOG_LEVEL": "WARNING",
                       "DEBUG": os.environ.get("DEBUG", "false"), **environ})
    sys.path.insert(0, str(REPO))
    try:
        import django

        django.setup()
        from django.core.management import call_command

        from portal.catalog.services import catalog_seed

        call_command("migrate", verbosity=0)
        catalog_seed()
        yield
    finally:
        from django.db import connections

        connections.close_all()
        _psql(admin, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def main() -> int:
    orgs = int(os.environ.get("BENCH_ORGS", "1000"))
    per_org = int(os.environ.get("BENCH_ORDERS_PER_ORG", "5"))
    segments = int(os.environ.get("BENCH_SEGMENTS", "5"))
    big = int(os.environ.get("BENCH_BIG_ORDERS", "2000"))
    repeat = int(os.environ.get("BENCH_REPEAT", "20"))
    history = int(os.environ.get("BENCH_HISTORY", "24"))
    with seeded_database("trainyard_billing_bench"):
        from django.db import connection

        from portal.billing.invoices import month_close, previous_month
        from portal.billing.models import InvoiceLine
        from portal.billing.selectors import organisation_usage

        now = datetime.now(UTC)
        last = previous_month(now)
        start = time.perf_counter()
        intervals = _fill(orgs=orgs, per_org=per_org, segments=segments, month_start=last.start)
        org = _big_org(big, now, history)
        print(f"filled {orgs:,} organisations, {orgs * per_org:,} orders, {intervals:,} usage intervals "
              f"in {last.label}; one organisation with {big:,} running orders, each node with "
              f"{history} earlier intervals "
              f"({time.perf_counter() - start:.1f}s)\n")
        print("| month close | invoices | lines | total s | ms per invoice | queries per invoice |")
        print("| --- | --- | --- | --- | --- | --- |")
        for run in ("first run", "second run"):
            with _counting(connection) as queries:
                began = time.perf_counter()
                ids = month_close(period=last, now=now)
                took = time.perf_counter() - began
            print(f"| {run} | {len(ids):,} | {InvoiceLine.objects.count():,} | {took:.1f} "
                  f"| {1000 * took / max(1, len(ids)):.1f} | {queries[0] / max(1, len(ids)):.1f} |")
        times = []
        for _ in range(repeat):
            with _counting(connection) as queries:
                began = time.perf_counter()
                usage = organisation_usage(org)
                times.append(1000 * (time.perf_counter() - began))
        times.sort()
        p95 = times[min(len(times) - 1, int(round(0.95 * (len(times) - 1))))]
        print(f"\n| cost so far, {big:,} orders | earlier intervals per node | runs | median ms | p95 ms "
              f"| queries | so far USD |")
        print("| --- | --- | --- | --- | --- | --- | --- |")
        print(f"| organisation_usage | {history} | {repeat} | {statistics.median(times):.0f} | {p95:.0f} "
              f"| {queries[0]} | {usage.so_far:,} |")
        return 0


if __name__ == "__main__":
    sys.exit(main())
