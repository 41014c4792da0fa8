"""The billing rule over measured time (portal.catalog.pricing.metered_charges), pure."""

from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest

from portal.catalog.pricing import QUOTE_START, Metered, billed_total, job_price, metered_charges, money

H, M = Decimal("23.60"), Decimal("12000.00")


def at(*args) -> datetime:
    return datetime(*args, tzinfo=UTC)


def charges(*stretches, granularity_s=3600):
    return {c.month: c for c in metered_charges(list(stretches), granularity_s=granularity_s)}


# Hand-overs at and around month boundaries: mid-month, the last hour of a 31-day month, a
# leap February's last day, New Year's Eve, the quote's own start (the first of a January).
STARTS = [at(2026, 3, 14, 5, 17), at(2026, 1, 31, 23, 30), at(2028, 2, 29, 12), at(2026, 12, 31, 22),
          QUOTE_START]


def _by_brute_force(start: datetime, most: int):
    """Oracle, independent of the rule's code: the hour starting at start + k h is billed in
    its calendar month; each month costs min(its hours × H, M). Yields (N, total) for N = 1…most."""
    hours_in = {}
    for k in range(most):
        moment = start + timedelta(hours=k)
        hours_in[(moment.year, moment.month)] = hours_in.get((moment.year, moment.month), 0) + 1
        yield k + 1, sum((min(n * H, M) for n in hours_in.values()), Decimal(0))


@pytest.mark.parametrize("start", STARTS, ids=lambda s: f"{s:%Y-%m-%d-%H%M}")
def test_the_quote_for_n_hours_is_the_ledgers_for_n_hours(start):
    """1 to 2,000 hours: the quote from ``start``, the brute-force rule, and the ledger's charges
    for the same hours written as two intervals (cut where a price change to the same rate
    would cut them) agree to the cent."""
    for hours, expected in _by_brute_force(start, 2000):
        quoted = job_price(hourly_usd=H, monthly_usd=M, train_hours=hours, provisioning_hours=0,
                           start=start)
        assert (quoted.billed_hours, quoted.total_usd) == (hours, expected), hours
        if hours % 97 == 0 or hours in (1, 671, 672, 696, 720, 730, 731, 743, 744, 745, 1460, 2000):
            end, cut = start + timedelta(hours=hours), start + timedelta(hours=hours * 0.37)
            ledger = metered_charges([Metered(start, cut, H, M), Metered(cut, end, H, M)])
            assert sum((c.total for c in ledger), Decimal(0)) == expected, hours
            assert quoted.billing == ("monthly" if any(c.by_month for c in ledger) else "hourly")


def test_a_31_day_month_of_use_is_one_monthly_rate_in_the_quote_and_the_ledger():
    """The rule is per calendar month: 744 h in January is capped once (the quote used to charge
    two started 730-hour months past 730 h); 744 h from mid-January spans two months, each
    capped on its own, and neither reaches the cap."""
    whole = job_price(hourly_usd=H, monthly_usd=M, train_hours=744, provisioning_hours=0)
    assert (whole.total_usd, whole.billing, whole.monthly_total_usd) == (M, "monthly", M)
    assert billed_total(H, M, 745)[0] == M + H  # one hour of February
    mid = billed_total(H, M, 744, start=at(2026, 1, 15))[0]
    assert mid == min(17 * 24 * H, M) + min(14 * 24 * H, M) == 744 * H


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
