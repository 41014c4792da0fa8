"""The billing rule over measured time (portal.catalog.pricing.metered_charges), pure."""

from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest

from portal.catalog.pricing import Metered, job_price, metered_charges, money

H, M = Decimal("23.60"), Decimal("12000.00")


def at(*args) -> datetime:
    return datetime(*args, tzinfo=UTC)


def charges(*stretches, granularity_s=3600):
    return {c.month: c for c in metered_charges(list(stretches), granularity_s=granularity_s)}


@pytest.mark.parametrize("hours", [1, 2, 7, 21, 100, 333, 508, 509, 729, 730])
def test_the_ledger_prices_n_hours_as_the_quote_does(hours):
    quoted = job_price(hourly_usd=H, monthly_usd=M, train_hours=hours, provisioning_hours=0)
    start = at(2026, 3, 1, 5, 17)
    [charge] = metered_charges([Metered(start, start + timedelta(hours=hours), H, M)])
    assert charge.units == quoted.billed_hours == hours
    assert charge.total == quoted.total_usd
    assert charge.by_month == (quoted.billing == "monthly")


def test_a_started_hour_is_billed_whole():
    start = at(2026, 3, 2, 10)
    [charge] = metered_charges([Metered(start, start + timedelta(minutes=61), H, M)])
    assert (charge.units, charge.total) == (2, 2 * H)


def test_a_month_boundary_mid_hour_starts_no_extra_hour():
    start = at(2026, 11, 30, 23, 30)
    got = charges(Metered(start, start + timedelta(hours=3), H, M))
    # Units start at 23:30, 00:30, 01:30: the first in November, two in December; three in all.
    assert (got[(2026, 11)].units, got[(2026, 12)].units) == (1, 2)
    assert got[(2026, 11)].total + got[(2026, 12)].total == 3 * H


def test_a_price_change_mid_hour_bills_that_hour_once_at_the_rate_where_it_started():
    new = Decimal("30.00")
    got = charges(Metered(at(2026, 3, 2, 10), at(2026, 3, 2, 10, 30), H, M),
                  Metered(at(2026, 3, 2, 10, 30), at(2026, 3, 2, 12), new, M))
    # 2 h measured: the unit from 10:00 at the old rate, the one from 11:00 at the new.
    assert got[(2026, 3)].units == 2
    assert got[(2026, 3)].total == H + new


def test_a_pause_is_not_billed_and_does_not_restart_the_hour():
    got = charges(Metered(at(2026, 3, 2, 10), at(2026, 3, 2, 10, 20), H, M),
                  Metered(at(2026, 3, 2, 15), at(2026, 3, 2, 15, 20), H, M))
    assert (got[(2026, 3)].units, got[(2026, 3)].total) == (1, H)


def test_a_whole_month_is_capped_at_the_monthly_rate_a_short_run_is_not():
    cheap_month = Decimal("5000.00")  # 720 h × 23.60 = 16,992 > 5,000
    got = charges(Metered(at(2026, 11, 1), at(2026, 12, 1), H, cheap_month))
    assert (got[(2026, 11)].units, got[(2026, 11)].total, got[(2026, 11)].by_month) == (
        720, cheap_month, True)
    short = charges(Metered(at(2026, 11, 1), at(2026, 11, 2), H, cheap_month))
    assert (short[(2026, 11)].total, short[(2026, 11)].by_month) == (24 * H, False)


def test_the_cap_applies_per_calendar_month():
    cheap_month = Decimal("5000.00")
    got = charges(Metered(at(2026, 10, 15), at(2026, 12, 15), H, cheap_month))
    assert [c.total for c in got.values()] == [cheap_month] * 3
    assert got[(2026, 10)].units == 17 * 24 and got[(2026, 12)].units == 14 * 24


def test_a_leap_day_is_billed():
    got = charges(Metered(at(2028, 2, 28), at(2028, 3, 1), H, M))
    assert got[(2028, 2)].units == 48  # 28 and 29 February
    whole = charges(Metered(at(2028, 2, 1), at(2028, 3, 1), Decimal("1.00"), Decimal("0")))
    assert (whole[(2028, 2)].units, whole[(2028, 2)].total) == (29 * 24, Decimal("696.00"))


def test_a_size_without_a_monthly_rate_is_billed_by_the_hour():
    got = charges(Metered(at(2026, 11, 1), at(2026, 12, 1), H, Decimal("0")))
    assert (got[(2026, 11)].total, got[(2026, 11)].cap) == (720 * H, None)


def test_a_node_bills_its_share_of_the_line():
    share = charges(Metered(at(2026, 3, 1), at(2026, 3, 1, 3), Decimal("10.01"), M, share=2))
    assert share[(2026, 3)].total * 2 == 3 * Decimal("10.01")


def test_a_finer_granularity():
    got = charges(Metered(at(2026, 3, 1), at(2026, 3, 1, 1, 0, 30), H, M), granularity_s=60)
    assert (got[(2026, 3)].units, money(got[(2026, 3)].total)) == (61, Decimal("23.99"))


def test_bad_stretches_are_refused():
    with pytest.raises(ValueError, match="before it starts"):
        metered_charges([Metered(at(2026, 3, 2), at(2026, 3, 1), H, M)])
    from zoneinfo import ZoneInfo
    berlin = datetime(2026, 3, 2, tzinfo=ZoneInfo("Europe/Berlin"))
    with pytest.raises(ValueError, match="UTC"):
        metered_charges([Metered(berlin, berlin + timedelta(hours=1), H, M)])
