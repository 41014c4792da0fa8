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


class SSHKeyForm(forms.Form):
    public_key = forms.CharField(
        label="Public key", strip=False,  # the service strips and checks the length itself
        widget=forms.Textarea(attrs={"rows": 3, "spellcheck": "false", "autocomplete": "off",
                                     "placeholder": "ssh-ed25519 AAAAC3Nza… you@laptop"}),
        help_text="The one line of your <code>~/.ssh/id_ed25519.pub</code> (ed25519, ecdsa, or "
                  "rsa of at least 2048 bits). Never the private key.")
    name = forms.CharField(max_length=100, required=False,
                           help_text="Optional; default: the key's comment, e.g. “you@laptop”.")

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("auto_id", "ssh_key_%s")  # unique ids next to the API key form
        super().__init__(*args, **kwargs)
