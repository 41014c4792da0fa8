"""The tax of an invoice (pure): the rate for the customer's country from settings, or the EU
B2B reverse charge when an EU business customer in another member state gives a valid VAT id,
with the wording each treatment requires on the invoice."""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal

from stdnum.eu import vat

EU = frozenset("AT BE BG CY CZ DE DK EE ES FI FR GR HR HU IE IT LT LU LV MT NL PL PT RO SE SI SK"
               .split())
VAT_PREFIX = {"GR": "EL"}  # Greece's VAT ids start with EL
REVERSE_CHARGE = ("Reverse charge: VAT to be accounted for by the recipient (Article 196, Council "
                  "Directive 2006/112/EC). Customer VAT id: {vat_id}.")
OUTSIDE_EU = ("Not subject to VAT in the EU: services supplied to a customer outside the EU "
              "(Article 44, Council Directive 2006/112/EC).")
ZERO = Decimal("0")


@dataclass(frozen=True)
class TaxTreatment:
    rate_percent: Decimal
    note: str
    reverse_charge: bool = False


def vat_id_problem(vat_id: str, country: str) -> str | None:
    """Why ``vat_id`` is not a valid EU VAT id of ``country`` (format and check digits), or None."""
    if not vat.is_valid(vat_id):
        return f"{vat_id!r} is not a valid EU VAT id (check the country prefix and the digits)."
    compact = vat.compact(vat_id)
    if not compact.startswith(VAT_PREFIX.get(country, country)):
        return f"VAT id {compact} is not one of {country}."
    return None


def parse_rates(text: str) -> dict[str, Decimal]:
    """``DE=19,FR=20`` → {"DE": 19, "FR": 20}; ValueError naming the bad entry."""
    rates = {}
    for entry in filter(None, (e.strip() for e in text.split(","))):
        country, _, rate = entry.partition("=")
        try:
            value = Decimal(rate.strip())
        except ArithmeticError:
            value = None
        if len(country.strip()) != 2 or value is None or not ZERO <= value < 100:
            raise ValueError(f"tax rate {entry!r}: write COUNTRY=PERCENT, e.g. DE=19")
        rates[country.strip().upper()] = value
    return rates


def tax_treatment(*, customer_country: str, vat_id: str, issuer_country: str,
                  rates: dict[str, Decimal]) -> TaxTreatment:
    country = customer_country.upper()
    rate = rates.get(country, ZERO)
    if country == issuer_country.upper():
        return TaxTreatment(rate, "")  # domestic: the VAT line says it all
    if country in EU and issuer_country.upper() in EU:
        if vat_id and vat_id_problem(vat_id, country) is None:
            return TaxTreatment(ZERO, REVERSE_CHARGE.format(vat_id=vat.compact(vat_id)), True)
        return TaxTreatment(rate, f"VAT {rate}% ({country})" if rate else "")
    if country not in EU and issuer_country.upper() in EU and not rate:
        return TaxTreatment(ZERO, OUTSIDE_EU)
    return TaxTreatment(rate, f"Tax {rate}%" if rate else "")
