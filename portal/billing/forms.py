from datetime import UTC
from decimal import Decimal

from django import forms

from portal.core.forms import VisibleTextMixin


class CreditNoteForm(VisibleTextMixin, forms.Form):
    amount = forms.DecimalField(label="Amount to credit (USD, before tax)", min_value=Decimal("0.01"),
                                max_digits=14, decimal_places=2)
    reason = forms.CharField(label="Reason (the customer reads it)", max_length=500,
                             widget=forms.Textarea(attrs={"rows": 2}),
                             initial="Failed provisioning charged")


class SpendLimitForm(VisibleTextMixin, forms.Form):
    monthly_usd = forms.DecimalField(label="Monthly limit (USD, before tax)", required=False,
                                     min_value=Decimal("1"), max_digits=12, decimal_places=2,
                                     help_text="Alerts at 50, 80 and 100 %; from 100 % new orders "
                                               "wait for our approval. Empty: no limit.")


class TerminateAtForm(VisibleTextMixin, forms.Form):
    """Empty: no automatic termination. The browser's datetime-local value is read as UTC."""

    terminate_at = forms.DateTimeField(label="Terminate automatically at (UTC)", required=False,
                                       input_formats=["%Y-%m-%dT%H:%M", "%Y-%m-%d %H:%M"],
                                       widget=forms.DateTimeInput(attrs={"type": "datetime-local"}))

    def clean_terminate_at(self):
        value = self.cleaned_data["terminate_at"]
        return value.replace(tzinfo=UTC) if value is not None and value.tzinfo is None else (
            value.astimezone(UTC) if value is not None else None)
