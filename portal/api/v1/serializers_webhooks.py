"""Input and output shapes of webhook endpoints and their delivery log."""

from rest_framework import serializers

from portal.api.v1.fields import StrictBooleanField, StrictCharField
from portal.core.text import VisibleText
from portal.webhooks.events import SUBSCRIBABLE
from portal.webhooks.models import WebhookAttempt, WebhookDelivery, WebhookEndpoint

EVENT_TYPES_HELP = f"Event types to receive; default all: {', '.join(SUBSCRIBABLE)}."


class WebhookEndpointInputSerializer(serializers.Serializer):
    url = serializers.URLField(max_length=500, help_text="https:// (plain http only to loopback "
                                                         "on a development server).")
    event_types = serializers.ListField(child=serializers.ChoiceField(choices=SUBSCRIBABLE),
                                        required=False, allow_empty=False, min_length=1, max_length=20,
                                        help_text=EVENT_TYPES_HELP)
    description = StrictCharField(max_length=200, required=False, allow_blank=True,
                                        validators=[VisibleText()])


class WebhookEndpointUpdateSerializer(WebhookEndpointInputSerializer):
    url = serializers.URLField(max_length=500, required=False)
    enabled = StrictBooleanField(required=False, help_text="Enabling a disabled endpoint "
                                                         "clears its failure record.")


class WebhookEndpointOutputSerializer(serializers.ModelSerializer):
    id = serializers.CharField(source="reference", read_only=True)
    organisation = serializers.SlugRelatedField(slug_field="slug", read_only=True)
    event_types = serializers.ListField(child=serializers.ChoiceField(choices=SUBSCRIBABLE))

    class Meta:
        model = WebhookEndpoint
        fields = ["id", "organisation", "url", "description", "event_types", "enabled",
                  "disabled_reason", "failing_since", "created_at"]
        read_only_fields = fields


class WebhookEndpointWithSecretSerializer(WebhookEndpointOutputSerializer):
    secret = serializers.CharField(read_only=True, help_text="Signs each delivery; shown only now.")

    class Meta(WebhookEndpointOutputSerializer.Meta):
        fields = [*WebhookEndpointOutputSerializer.Meta.fields, "secret"]
        read_only_fields = fields


class WebhookSecretSerializer(serializers.Serializer):
    secret = serializers.CharField(read_only=True, help_text="The new signing secret; shown only now.")


class WebhookAttemptSerializer(serializers.ModelSerializer):
    class Meta:
        model = WebhookAttempt
        fields = ["number", "at", "status_code", "duration_ms", "error"]
        read_only_fields = fields


class WebhookDeliverySerializer(serializers.ModelSerializer):
    event_id = serializers.CharField(source="event.reference", read_only=True)
    event_type = serializers.CharField(source="event.type", read_only=True)
    log = WebhookAttemptSerializer(many=True, read_only=True)

    class Meta:
        model = WebhookDelivery
        fields = ["id", "event_id", "event_type", "state", "attempts", "next_attempt_at",
                  "created_at", "log"]
        read_only_fields = fields
