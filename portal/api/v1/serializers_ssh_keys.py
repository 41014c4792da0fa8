"""SSH keys of an organisation (and of a reseller's customers)."""

from rest_framework import serializers

from portal.accounts.models import SSHKey
from portal.api.v1.fields import StrictCharField, StrictSlugField
from portal.api.v1.serializers_orders import CUSTOMER_HELP, FILTER_HELP
from portal.core.text import VisibleText


class SSHKeyInputSerializer(serializers.Serializer):
    public_key = StrictCharField(
        trim_whitespace=False, help_text="One OpenSSH public key line: ed25519, ecdsa "
        "(nistp256/384/521) or rsa of at least 2048 bits, e.g. `ssh-ed25519 AAAA… you@laptop`.")
    name = StrictCharField(required=False, allow_blank=True, max_length=100, default="",
                                 validators=[VisibleText()],
                                 help_text="Default: the key's comment.")
    customer = StrictSlugField(required=False, help_text=CUSTOMER_HELP)


class SSHKeyListFilterSerializer(serializers.Serializer):
    customer = serializers.SlugField(required=False, allow_blank=True, help_text=FILTER_HELP)


class SSHKeyOutputSerializer(serializers.ModelSerializer):
    organisation = serializers.SlugRelatedField(slug_field="slug", read_only=True)

    class Meta:
        model = SSHKey
        fields = ["id", "organisation", "name", "key_type", "bits", "fingerprint", "public_key",
                  "created_at"]
        read_only_fields = fields
