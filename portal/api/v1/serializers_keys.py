"""Input and output shapes of API keys."""

from rest_framework import serializers

from portal.accounts.models import ApiKey
from portal.api.v1.fields import StrictCharField
from portal.core.text import VisibleText


class ApiKeyInputSerializer(serializers.Serializer):
    name = StrictCharField(max_length=100, validators=[VisibleText()],
                                 help_text="What the key is for, e.g. 'storefront'.")
    scopes = serializers.MultipleChoiceField(choices=ApiKey.Scope.choices, default=["read", "write"],
                                             help_text="`read`, or `read` and `write`.")


class ApiKeyOutputSerializer(serializers.ModelSerializer):
    scopes = serializers.ListField(child=serializers.ChoiceField(choices=ApiKey.Scope.choices))
    active = serializers.BooleanField(source="is_active", read_only=True)

    class Meta:
        model = ApiKey
        fields = ["prefix", "name", "scopes", "active", "created_at", "last_used_at", "revoked_at"]
        read_only_fields = fields


class ApiKeyIssuedSerializer(ApiKeyOutputSerializer):
    key = serializers.CharField(read_only=True, help_text="`ty_<prefix>_<secret>`; shown only now.")

    class Meta(ApiKeyOutputSerializer.Meta):
        fields = [*ApiKeyOutputSerializer.Meta.fields, "key"]
        read_only_fields = fields
