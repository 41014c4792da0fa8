"""Input and output of a server's GPU metrics (``provisioning.monitoring``)."""

from rest_framework import serializers

from provisioning.monitoring.queries import METRICS, RANGES


class MetricsQuerySerializer(serializers.Serializer):
    metric = serializers.ChoiceField(choices=[(k, m.label) for k, m in METRICS.items()],
                                     default="gpu_util")
    range = serializers.ChoiceField(choices=[(k, r.label) for k, r in RANGES.items()], default="1h")


class PointField(serializers.ListField):
    child = serializers.FloatField()


class SeriesSerializer(serializers.Serializer):
    node = serializers.CharField(help_text="The node's hostname.")
    gpu = serializers.CharField(help_text="The GPU's index on the node (dcgm-exporter's gpu label).")
    points = serializers.ListField(child=PointField(min_length=2, max_length=2),
                                   help_text="[unix seconds, value] pairs, oldest first.")


class MetricsSerializer(serializers.Serializer):
    metric = serializers.CharField()
    label = serializers.CharField()
    unit = serializers.CharField()
    range = serializers.CharField()
    start = serializers.DateTimeField()
    end = serializers.DateTimeField()
    step_s = serializers.IntegerField(help_text="Seconds between points.")
    simulated = serializers.BooleanField(
        help_text="True when the series is generated (a node with no real GPUs behind it).")
    unavailable = serializers.CharField(
        allow_blank=True,
        help_text="Why some series are missing (the store did not answer, or the portal collects no "
                  "GPU metrics); empty when none are.")
    series = SeriesSerializer(many=True)
