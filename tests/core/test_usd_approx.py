"""A job's estimated cost is shown as money is rounded (half up, portal.catalog.pricing), not as
a float rounds it (half to even, and binary fractions)."""

from decimal import Decimal

import pytest

from portal.catalog.pricing import money
from portal.core.units import usd_approx


@pytest.mark.parametrize("value, shown", [
    (Decimal("1002.50"), "$1,003"),  # a float's round-half-even gave "$1,002"
    (1002.5, "$1,003"),
    (Decimal("2.675"), "$2.68"),  # the float 2.675 is 2.67499…: it gave "$2.67"
    (Decimal("999.995"), "$1,000"),  # rounds to $1,000.00, so whole dollars
    (4.2, "$4.20"),
    (0, "$0.00"),
    (Decimal("12345.678"), "$12,346"),
])
def test_an_estimated_cost_rounds_half_up_like_money(value, shown):
    assert usd_approx(value) == shown


def test_any_size_or_a_missing_figure_reads_without_an_error():
    assert usd_approx(Decimal("1e30")) == "$1,000,000,000,000,000,000,000,000,000,000"
    assert usd_approx(float("inf")) == usd_approx(float("nan")) == "—"


def test_below_a_thousand_it_agrees_with_the_money_module_to_the_cent():
    for amount in (Decimal("0.005"), Decimal("2.675"), Decimal("999.994")):
        assert usd_approx(amount) == f"${money(amount):,}"
