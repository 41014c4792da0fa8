"""Cost so far reads one month of the ledger (and each meter's measured time before it, summed by
the database) instead of the whole history: the same figures, to the cent, as pricing the whole
history of every meter (the computation it replaced), over random ledgers with pauses, month
boundaries, price changes, several nodes and a bucket."""

import importlib
import random
from collections import defaultdict
from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest
from django.conf import settings

from portal.billing.models import UsageInterval
from portal.billing.selectors import month_of, usage_costs
from portal.billing.services import measured_before_set, order_price_change, usage_sync
from portal.catalog.pricing import Metered, metered_charges, money
from portal.orders.states import OrderState
from tests.factories import make_order

START = datetime(2025, 12, 20, tzinfo=UTC)
RATES = [(Decimal("23.60"), Decimal("12000.00")), (Decimal("31.15"), Decimal("9000.00")),
         (Decimal("4.05"), Decimal("0.00")), (Decimal("0.10"), Decimal("50.00"))]


def _random_ledger(rng: random.Random, order) -> None:
    """Per meter: stretches of 1 minute to 40 days, pauses of 0 to 3 days (0: a price change,
    the next interval starts where the last ended), the last one sometimes still open."""
    rows = []
    for kind, meter, share in (("node", 1, 2), ("node", 2, 2), ("storage", 0, 1)):
        cursor = START + timedelta(minutes=rng.randrange(0, 60 * 24 * 20))
        for n in range(rng.randrange(1, 9)):
            if n:
                cursor += rng.choice([timedelta(0), timedelta(minutes=rng.randrange(1, 4320))])
            length = timedelta(minutes=rng.choice([1, 59, 61, rng.randrange(1, 60 * 24 * 40)]))
            hourly, monthly = rng.choice(RATES)
            rows.append(UsageInterval(order=order, kind=kind, meter=meter, label=f"{kind}-{meter}",
                                      started_at=cursor, ended_at=cursor + length, hourly=hourly,
                                      monthly=monthly, share=share, opened_by="test"))
            cursor += length
        if rng.random() < 0.5:
            rows[-1].ended_at = None
    measured_before_set(rows)
    UsageInterval.objects.bulk_create(rows)


def _whole_history(order, at: datetime) -> dict:
    """The replaced computation: every interval of each meter since its first, priced by the
    rule, the month of ``at`` read off (so far: cut at ``at``; forecast: at the month's end)."""
    period = month_of(at)
    meters = defaultdict(list)
    for row in UsageInterval.objects.filter(order=order).order_by("started_at"):
        meters[(row.kind, row.meter)].append(row)

    def month(rows, until):
        stretches = [Metered(r.started_at, min(r.ended_at or until, until), r.hourly, r.monthly,
                             r.share) for r in rows if r.started_at < until]
        for charge in metered_charges([s for s in stretches if s.end > s.start],
                                      granularity_s=settings.BILLING_GRANULARITY_S):
            if charge.month == (period.start.year, period.start.month):
                return money(charge.total), charge.units, charge.by_month
        return money(0), 0, False

    result = {}
    for key, rows in meters.items():
        if any(r.started_at < period.end and (r.ended_at is None or r.ended_at > period.start)
               for r in rows):
            (so_far, units, by_month), (forecast, _, _) = month(rows, at), month(rows, period.end)
            result[key] = (so_far, forecast, units, by_month)
    return result


def _instants(rng: random.Random) -> list[datetime]:
    """Month boundaries and their neighbours, and random moments from December to April."""
    edges = [datetime(2026, m, 1, tzinfo=UTC) for m in (1, 2, 3, 4)]
    near = [e + d for e in edges for d in (timedelta(0), timedelta(minutes=1), -timedelta(microseconds=1))]
    spread = [START + timedelta(minutes=rng.randrange(0, 60 * 24 * 130)) for _ in range(6)]
    return near + spread


@pytest.mark.parametrize("seed", range(12))
def test_one_month_read_prices_as_the_whole_history(catalog, people, seed):
    rng = random.Random(seed)
    order = make_order(people.acme, state=OrderState.ACTIVE, node_count=2)
    _random_ledger(rng, order)
    compared = 0
    for at in _instants(rng):
        expected = _whole_history(order, at)
        got = {(m.kind, m.meter): (m.so_far, m.forecast, m.units, m.by_month)
               for cost in usage_costs(order_ids=[order.pk], at=at) for m in cost.meters}
        assert got == expected, (seed, at)
        compared += len(got)
    assert compared  # the seeds give meters with usage in the months read


def test_an_organisations_month_is_one_query_however_long_its_history(
        catalog, people, django_assert_num_queries):
    rng = random.Random(99)
    for _ in range(3):
        _random_ledger(rng, make_order(people.acme, state=OrderState.ACTIVE, node_count=2))
    for at in (datetime(2026, 1, 15, tzinfo=UTC), datetime(2026, 4, 20, tzinfo=UTC)):
        with django_assert_num_queries(1):
            usage_costs(organisation_id=people.acme.pk, at=at)


def test_the_ledger_writes_each_intervals_measured_time_before_it(catalog, people):
    """What ``usage_sync`` and a price change write is what working it out from the rows gives."""
    order = make_order(people.acme, state=OrderState.ACTIVE, node_count=2)
    moments = [datetime(2026, 1, 30, 22, 10, tzinfo=UTC) + timedelta(hours=7 * n, minutes=13 * n)
               for n in range(12)]
    for n, moment in enumerate(moments):
        nodes = {1: "gpu-1", 2: "gpu-2"} if n % 3 else {1: "gpu-1"}
        usage_sync(order=order, nodes=nodes if n % 4 else {}, storage=False, at=moment, cause="t")
        if n == 6:
            order_price_change(order=order, hourly="30.00", monthly="9000", by=people.olga,
                               at=moment + timedelta(minutes=20))
    rows = list(UsageInterval.objects.filter(order=order))
    written = {row.pk: row.measured_before_us for row in rows}
    assert len(rows) >= 8 and any(written.values())
    measured_before_set(rows)
    assert {row.pk: row.measured_before_us for row in rows} == written


def test_the_migration_fills_what_the_service_works_out(catalog, people):
    """Migration 0006 is frozen (it imports no live code): over random ledgers it fills in the
    same measured time before each interval as ``measured_before_set`` works out."""
    from django.apps import apps

    fill = importlib.import_module("portal.billing.migrations.0006_usage_measured_before").fill
    rng = random.Random(6)
    for _ in range(3):
        _random_ledger(rng, make_order(people.acme, state=OrderState.ACTIVE, node_count=2))
    expected = {row.pk: row.measured_before_us for row in UsageInterval.objects.all()}
    assert any(expected.values())
    UsageInterval.objects.update(measured_before_us=0)
    fill(apps, None)
    assert {row.pk: row.measured_before_us for row in UsageInterval.objects.all()} == expected
