from django import forms

from portal.accounts.models import ApiKey
from portal.accounts.ssh_keys import looks_private
from portal.core.forms import VisibleTextMixin


class ApiKeyForm(VisibleTextMixin, forms.Form):
    name = forms.CharField(max_length=100, help_text="What the key is for, e.g. “billing sync”.")
    scopes = forms.MultipleChoiceField(
        choices=ApiKey.Scope.choices, initial=["read"], widget=forms.CheckboxSelectMultiple,
        help_text="A read-only key can look but not order, cancel or terminate; tick write only "
                  "for an integration that orders.")

    def clean_scopes(self):
        scopes = self.cleaned_data["scopes"]
        if "write" in scopes and "read" not in scopes:
            scopes = ["read", *scopes]  # a key that writes also reads
        return scopes


PRIVATE_KEY_IN_FIELD = ("That was a private key: it is not kept nor shown again. Paste the public key "
                        "(the .pub file) instead, and treat this private key as exposed.")


class SSHKeyForm(VisibleTextMixin, forms.Form):
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

    def full_clean(self):
        """A pasted private key is refused (``ssh_keys.parse_public_key`` says why) and never
        rendered again: the fields that held it come back empty."""
        super().full_clean()
        if not self.is_bound:
            return
        leaked = [name for name in self.fields if looks_private(self.data.get(self.add_prefix(name), ""))]
        if leaked:
            self.data = self.data.copy()
            for name in leaked:
                self.data[self.add_prefix(name)] = ""
            if "public_key" not in leaked:  # a private key in the name field: say so there
                self.add_error(None, PRIVATE_KEY_IN_FIELD)


# --- team and account ---------------------------------------------------------------------------
class InviteForm(VisibleTextMixin, forms.Form):
    email = forms.EmailField(label="E-mail address", max_length=254,
                             widget=forms.EmailInput(attrs={"autocomplete": "off",
                                                            "placeholder": "colleague@example.com"}))
    role = forms.ChoiceField(label="Role")

    def __init__(self, *args, roles=(), **kwargs):
        kwargs.setdefault("auto_id", "invite_%s")
        super().__init__(*args, **kwargs)
        self.fields["role"].choices = list(roles)


class RoleForm(VisibleTextMixin, forms.Form):
    role = forms.ChoiceField(label="Role")

    def __init__(self, *args, roles=(), **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["role"].choices = list(roles)


class _NewPassword(VisibleTextMixin, forms.Form):
    password = forms.CharField(label="Password", strip=False,
                               widget=forms.PasswordInput(attrs={"autocomplete": "new-password"}),
                               help_text="At least 8 characters, not only digits, not a common one.")
    password_again = forms.CharField(label="Password again", strip=False,
                                     widget=forms.PasswordInput(attrs={"autocomplete": "new-password"}))

    def clean(self):
        data = super().clean()
        if data.get("password") and data.get("password_again") != data["password"]:
            self.add_error("password_again", "The two passwords differ; type the same one twice.")
        return data


class AcceptAsNewUserForm(_NewPassword):
    """Creates the login of an invited person (the e-mail is the invitation's)."""

    first_name = forms.CharField(label="Your name", max_length=150, required=False)
    username = forms.CharField(label="Username", max_length=150,
                               widget=forms.TextInput(attrs={"autocomplete": "username"}),
                               help_text="Letters, digits and @ . + - _ only.")
    field_order = ["first_name", "username", "password", "password_again"]


class SignupForm(_NewPassword):
    organisation_name = forms.CharField(label="Organisation", max_length=200,
                                        help_text="Your company or lab; you become its admin.")
    first_name = forms.CharField(label="Your name", max_length=150, required=False)
    email = forms.EmailField(label="E-mail address", max_length=254,
                             help_text="We send a link to confirm it before the account works.")
    username = forms.CharField(label="Username", max_length=150,
                               widget=forms.TextInput(attrs={"autocomplete": "username"}))
    field_order = ["organisation_name", "first_name", "email", "username", "password",
                   "password_again"]


class EmailChangeForm(VisibleTextMixin, forms.Form):
    email = forms.EmailField(label="New e-mail address", max_length=254)
    current_password = forms.CharField(
        label="Your current password", strip=False,
        widget=forms.PasswordInput(attrs={"autocomplete": "current-password"}),
        help_text="So nobody at an unlocked computer can take over the account.")

    def __init__(self, *args, user=None, **kwargs):
        super().__init__(*args, **kwargs)
        self.user = user

    def clean_current_password(self):
        password = self.cleaned_data["current_password"]
        if not self.user.check_password(password):
            raise forms.ValidationError("That is not your current password.")
        return password


# --- two-factor sign-in -------------------------------------------------------------------------
class TokenForm(VisibleTextMixin, forms.Form):
    token = forms.CharField(
        label="Code", max_length=32, strip=True,
        widget=forms.TextInput(attrs={"autocomplete": "one-time-code", "autocapitalize": "off",
                                      "spellcheck": "false", "autofocus": True,
                                      "placeholder": "123456"}))

    def __init__(self, *args, label=None, help_text="", **kwargs):
        super().__init__(*args, **kwargs)
        if label:
            self.fields["token"].label = label
        self.fields["token"].help_text = help_text


class OrganisationTwoFactorForm(VisibleTextMixin, forms.Form):
    require_two_factor = forms.BooleanField(
        required=False, label="Require two-factor sign-in of every member",
        help_text="Members without an authenticator app are asked to set one up at their next "
                  "page; API keys are not affected.")
