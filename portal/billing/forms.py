import re
from datetime import UTC
from decimal import Decimal

from django import forms

from portal.billing.models import BillingProfile
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


class BillingProfileForm(VisibleTextMixin, forms.ModelForm):
    """Validated as the model validates (its clean: the VAT id by python-stdnum, of the country)."""

    # Longer than a code, so "Germany" is answered with what to write instead of a length error.
    country = forms.CharField(max_length=60, help_text="ISO 3166 code, e.g. DE.",
                              widget=forms.TextInput(attrs={"autocomplete": "country", "size": 3}))

    class Meta:
        model = BillingProfile
        fields = ["legal_name", "address", "country", "vat_id", "email"]
        labels = {"legal_name": "Legal name", "vat_id": "VAT id (EU businesses)",
                  "email": "Invoice e-mail"}
        widgets = {"address": forms.Textarea(attrs={"rows": 3})}

    def clean_country(self):
        country = self.cleaned_data["country"].strip().upper()
        if not re.fullmatch(r"[A-Z]{2}", country):
            raise forms.ValidationError("Two letters, the ISO 3166 code of the country: e.g. DE, FR, US.")
        return country

    def clean_vat_id(self):
        return self.cleaned_data["vat_id"].strip().upper().replace(" ", "")
