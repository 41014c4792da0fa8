"""The form of an organisation's webhook endpoint. It checks shape only; the services (the
same the API calls) check the address and the event types."""

from django import forms

from portal.core.forms import VisibleTextMixin
from portal.webhooks.events import SUBSCRIBABLE, EventType


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
