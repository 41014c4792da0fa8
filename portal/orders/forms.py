"""Forms of the customer's order pages: cancel, terminate (with a confirmation step)."""

from django import forms

from portal.core.forms import VisibleTextMixin


class CancelForm(VisibleTextMixin, forms.Form):
    reason = forms.CharField(label="Why are you cancelling? (optional)", required=False,
                             max_length=500, widget=forms.TextInput)


class StaffCancelForm(VisibleTextMixin, forms.Form):
    """Staff cancel for the customer (e.g. an order whose set-up failed): the reason is
    required, because the customer reads it in the order's history and the API."""

    reason = forms.CharField(label="Reason (the customer reads it)", max_length=500,
                             widget=forms.TextInput,
                             error_messages={"required": "Give the customer a reason for the "
                                                         "cancellation."})


class TerminateForm(VisibleTextMixin, forms.Form):
    confirm = forms.BooleanField(
        label="I understand that the server is shut down and its local disks are wiped",
        error_messages={"required": "Tick the box to confirm: termination cannot be undone."})
    note = forms.CharField(label="Note for our staff (optional)", required=False, max_length=500,
                           widget=forms.TextInput)
