"""Input fields that take the JSON type the schema states and nothing DRF would coerce."""

from rest_framework import serializers


class StrictBooleanField(serializers.BooleanField):
    """JSON true or false only, as the schema says (DRF's field also takes 0, 1, "yes", "on" …)."""

    def to_internal_value(self, data):
        if not isinstance(data, bool):
            self.fail("invalid", input=data)
        return data


class StrictCharField(serializers.CharField):
    """A JSON string only, as the schema says (DRF's field also takes 0 or 1.5 and stores "0")."""

    def to_internal_value(self, data):
        if not isinstance(data, str):
            self.fail("invalid")
        return super().to_internal_value(data)


class StrictSlugField(StrictCharField, serializers.SlugField):
    pass
