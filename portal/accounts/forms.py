from django import forms

from portal.accounts.models import ApiKey


class ApiKeyForm(forms.Form):
    name = forms.CharField(max_length=100, help_text="What the key is for, e.g. “billing sync”.")
    scopes = forms.MultipleChoiceField(
        choices=ApiKey.Scope.choices, initial=["read", "write"], widget=forms.CheckboxSelectMultiple,
        help_text="A read-only key can look but not order, cancel or terminate.")

    def clean_scopes(self):
        scopes = self.cleaned_data["scopes"]
        if "write" in scopes and "read" not in scopes:
            scopes = ["read", *scopes]  # a key that writes also reads
        return scopes
