import secrets

from django.conf import settings
from django.contrib.auth.models import AbstractUser
from django.db import models
from django.db.models import Q
from django.utils.functional import cached_property


class User(AbstractUser):
    """A person. Staff roles belong to the hosting company; customers act through memberships."""

    class StaffRole(models.TextChoices):
        NONE = "", "None"
        APPROVER = "approver", "Staff approver"
        OPERATOR = "operator", "Operator"

    staff_role = models.CharField(max_length=16, choices=StaffRole.choices, blank=True, default="")

    @property
    def is_approver(self) -> bool:
        return self.is_superuser or self.staff_role == self.StaffRole.APPROVER

    @property
    def is_operator(self) -> bool:
        return self.is_superuser or self.staff_role == self.StaffRole.OPERATOR

    @property
    def is_hosting_staff(self) -> bool:
        return self.is_superuser or bool(self.staff_role)

    @cached_property
    def home_organisation(self):
        """The organisation the navigation links to: the person's first membership's, in one
        query, once per request."""
        first = self.memberships.select_related("organisation").order_by("pk").first()
        return first.organisation if first else None


class Organisation(models.Model):
    class Kind(models.TextChoices):
        CUSTOMER = "customer", "Customer"
        RESELLER = "reseller", "Reseller"

    name = models.CharField(max_length=200)
    slug = models.SlugField(unique=True)
    kind = models.CharField(max_length=16, choices=Kind.choices, default=Kind.CUSTOMER)
    parent = models.ForeignKey(
        "self",
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="children",
        help_text="The reseller that sells to this customer organisation.",
    )
    require_two_factor = models.BooleanField(
        default=False, help_text="Members must sign in with a second factor (an authenticator "
                                 "app); those without one are sent to set it up.")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name"]
        constraints = [
            models.CheckConstraint(
                condition=Q(parent__isnull=True) | Q(kind="customer"),
                name="only_customers_have_a_reseller",
            )
        ]

    def __str__(self) -> str:
        return self.name


class Membership(models.Model):
    class Role(models.TextChoices):
        MEMBER = "member", "Customer member"
        ADMIN = "admin", "Organisation admin"  # invites, sets roles, removes members
        RESELLER_ADMIN = "reseller_admin", "Reseller admin"

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE,
                             related_name="memberships")
    organisation = models.ForeignKey(Organisation, on_delete=models.CASCADE,
                                     related_name="memberships")
    role = models.CharField(max_length=32, choices=Role.choices, default=Role.MEMBER)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["user", "organisation"], name="one_membership_per_org")
        ]

    def __str__(self) -> str:
        return f"{self.user} in {self.organisation} ({self.get_role_display()})"


def default_api_key_scopes() -> list[str]:
    return ["read", "write"]


class ApiKey(models.Model):
    """A reseller's or customer's key for /api/v1/. Only a hash of the secret is stored."""

    class Scope(models.TextChoices):
        READ = "read", "Read (GET)"
        WRITE = "write", "Write (create, cancel, terminate, server actions)"

    organisation = models.ForeignKey(Organisation, on_delete=models.CASCADE,
                                     related_name="api_keys")
    name = models.CharField(max_length=100)
    prefix = models.CharField(max_length=16, unique=True, help_text="Shown to identify the key.")
    hashed_secret = models.CharField(max_length=64)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True,
                                   on_delete=models.SET_NULL)
    created_at = models.DateTimeField(auto_now_add=True)
    last_used_at = models.DateTimeField(null=True, blank=True,
                                        help_text="Written at most once a minute.")
    scopes = models.JSONField(default=default_api_key_scopes,
                              help_text='What the key may do: ["read"] or ["read", "write"].')
    revoked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"{self.name} ({self.prefix}…)"

    @property
    def is_active(self) -> bool:
        return self.revoked_at is None


class SSHKey(models.Model):
    """A public key that logs in to servers: a person's own (on every server of the organisations
    they belong to) or an organisation's (on all its servers). Validated by
    ``portal.accounts.ssh_keys``; only the public half is ever stored."""

    class KeyType(models.TextChoices):
        ED25519 = "ssh-ed25519", "Ed25519"
        ECDSA_P256 = "ecdsa-sha2-nistp256", "ECDSA P-256"
        ECDSA_P384 = "ecdsa-sha2-nistp384", "ECDSA P-384"
        ECDSA_P521 = "ecdsa-sha2-nistp521", "ECDSA P-521"
        RSA = "ssh-rsa", "RSA"

    user = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True,
                             on_delete=models.CASCADE, related_name="ssh_keys")
    organisation = models.ForeignKey(Organisation, null=True, blank=True,
                                     on_delete=models.CASCADE, related_name="ssh_keys")
    name = models.CharField(max_length=100)
    public_key = models.TextField(help_text="The key line: type and base64, no options.")
    key_type = models.CharField(max_length=32, choices=KeyType.choices)
    bits = models.PositiveIntegerField()
    fingerprint = models.CharField(max_length=64, help_text="SHA256:…, as ssh-keygen -l prints it.")
    created_at = models.DateTimeField(auto_now_add=True)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True,
                                   on_delete=models.SET_NULL, related_name="+")

    class Meta:
        ordering = ["-created_at", "-pk"]
        constraints = [
            models.CheckConstraint(
                condition=Q(user__isnull=True, organisation__isnull=False)
                | Q(user__isnull=False, organisation__isnull=True),
                name="ssh_key_belongs_to_a_user_or_an_organisation",
            ),
            models.UniqueConstraint(fields=["user", "fingerprint"], condition=Q(user__isnull=False),
                                    name="one_ssh_key_per_user_and_fingerprint"),
            models.UniqueConstraint(fields=["organisation", "fingerprint"],
                                    condition=Q(organisation__isnull=False),
                                    name="one_ssh_key_per_organisation_and_fingerprint"),
        ]

    def __str__(self) -> str:
        return f"{self.name} ({self.fingerprint})"

    @property
    def type_label(self) -> str:
        label = self.get_key_type_display()
        return f"{label} {self.bits}" if self.key_type == self.KeyType.RSA else label


def _invitation_reference() -> str:
    return "I-" + secrets.token_hex(4).upper()


def _nonce() -> str:
    return secrets.token_hex(16)


class Invitation(models.Model):
    """An invitation, sent by e-mail, to join an organisation with a role. The link carries a
    token signed with the site's key that names this row and its nonce
    (``portal.accounts.tokens``): nothing secret is stored, and revoking or accepting it ends
    the link."""

    reference = models.CharField(max_length=12, unique=True, default=_invitation_reference,
                                 editable=False)
    organisation = models.ForeignKey(Organisation, on_delete=models.CASCADE,
                                     related_name="invitations")
    email = models.EmailField()
    role = models.CharField(max_length=32, choices=Membership.Role.choices,
                            default=Membership.Role.MEMBER)
    nonce = models.CharField(max_length=32, default=_nonce, editable=False)
    invited_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True,
                                   on_delete=models.SET_NULL, related_name="+")
    invited_by_key = models.ForeignKey(ApiKey, null=True, blank=True, on_delete=models.SET_NULL,
                                       related_name="+", help_text="The API key that invited.")
    created_at = models.DateTimeField(auto_now_add=True)
    expires_at = models.DateTimeField()
    sent_at = models.DateTimeField(null=True, blank=True,
                                   help_text="When the e-mail went out (its task claims it).")
    accepted_at = models.DateTimeField(null=True, blank=True)
    accepted_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True,
                                    on_delete=models.SET_NULL, related_name="+")
    revoked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-pk"]

    def __str__(self) -> str:
        return f"{self.email} → {self.organisation} ({self.get_role_display()})"

    def state_at(self, now) -> str:
        if self.accepted_at:
            return "accepted"
        if self.revoked_at:
            return "revoked"
        return "expired" if self.expires_at <= now else "pending"
