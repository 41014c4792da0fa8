"""Forms of a reseller's pages (customers, resale prices). They check shape only; the services
(the same the API calls) check the rest."""

from decimal import Decimal

from django import forms
from django.core.validators import MaxValueValidator, MinValueValidator

from portal.catalog.models import RESALE_HELP
from portal.catalog.pricing import MAX_PERCENT, MIN_PERCENT
from portal.core.forms import VisibleTextMixin

OUT_OF_RANGE = f"Give a markup between {MIN_PERCENT} and {MAX_PERCENT} %%."  # a validator formats it
PERCENT_VALIDATORS = [MinValueValidator(MIN_PERCENT, message=OUT_OF_RANGE),
                      MaxValueValidator(MAX_PERCENT, message=OUT_OF_RANGE)]


class CustomerForm(VisibleTextMixin, forms.Form):
    name = forms.CharField(max_length=200, help_text="The customer's company or team, e.g. “Acme AI”.")
    slug = forms.SlugField(max_length=50, required=False,
                           help_text="Its short name in URLs and the API; default: made from the name.")


class CustomerRenameForm(VisibleTextMixin, forms.Form):
    name = forms.CharField(max_length=200)


class ResalePricesForm(VisibleTextMixin, forms.Form):
    """The markup for everything and, per server (SKU) and storage provider, its own markup
    (blank: the markup for everything). Fields are named by key: ``sku:<slug>``, ``storage:<slug>``."""

    percent = forms.DecimalField(label="Markup on everything (%)", max_digits=5, decimal_places=2,
                                 validators=PERCENT_VALIDATORS, help_text=RESALE_HELP,
                                 initial=Decimal("0"))

    def __init__(self, *args, keys=(), **kwargs):
        super().__init__(*args, **kwargs)
        for key in keys:
            self.fields[key] = forms.DecimalField(
                label="Markup (%)", max_digits=5, decimal_places=2, required=False,
                validators=PERCENT_VALIDATORS, widget=forms.NumberInput(
                    attrs={"step": "0.01", "placeholder": "—", "inputmode": "decimal"}))

    def items(self) -> dict:
        return {key: value for key, value in self.cleaned_data.items() if key != "percent"}
