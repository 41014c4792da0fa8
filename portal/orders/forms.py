"""Forms of the customer's order pages: cancel, terminate (with a confirmation step)."""

from django import forms


class CancelForm(forms.Form):
    reason = forms.CharField(label="Why are you cancelling? (optional)", required=False,
                             max_length=500, widget=forms.TextInput)


class TerminateForm(forms.Form):
    confirm = forms.BooleanField(
        label="I understand that the server is shut down and its local disks are wiped",
        error_messages={"required": "Tick the box to confirm: termination cannot be undone."})
    note = forms.CharField(label="Note for our staff (optional)", required=False, max_length=500,
                           widget=forms.TextInput)
