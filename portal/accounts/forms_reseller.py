"""Forms of a reseller's pages (customers, resale prices) and of an organisation's webhook
endpoints. They check shape only; the services (the same the API calls) check the rest."""

from decimal import Decimal

from django import forms

from portal.catalog.models import PERCENT_VALIDATORS, RESALE_HELP
from portal.core.forms import VisibleTextMixin
from portal.webhooks.events import SUBSCRIBABLE, EventType


class CustomerForm(VisibleTextMixin, forms.Form):
    name = forms.CharField(max_length=200, help_text="The customer's company or team, e.g. “Acme AI”.")
    slug = forms.SlugField(max_length=50, required=False,
                           help_text="Its short name in URLs and the API; default: made from the name.")


class CustomerRenameForm(VisibleTextMixin, forms.Form):
    name = forms.CharField(max_length=200)


def _event_choices():
    return [(value, f"{value} — {EventType(value).label}") for value in SUBSCRIBABLE]


class WebhookForm(VisibleTextMixin, forms.Form):
    url = forms.URLField(label="URL", max_length=500, assume_scheme="https",
                         widget=forms.URLInput(attrs={"placeholder": "https://example.com/hooks/trainyard"}),
                         help_text="An https:// address we POST each event to, signed with the "
                                   "endpoint's secret.")
    event_types = forms.MultipleChoiceField(label="Events", choices=_event_choices,
                                            initial=SUBSCRIBABLE, widget=forms.CheckboxSelectMultiple)
    description = forms.CharField(max_length=200, required=False,
                                  help_text="Optional: what receives it, e.g. “billing sync”.")


class ResalePricesForm(forms.Form):
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
                    attrs={"step": "0.01", "placeholder": "same as everything", "inputmode": "decimal"}))

    def items(self) -> dict:
        return {key: value for key, value in self.cleaned_data.items() if key != "percent"}
