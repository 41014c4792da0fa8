"""Alerts Prometheus raised on a node (through Alertmanager's webhook): one row per alert from
firing to resolved. A node with an open alert "needs attention" (derived, not stored on the node);
every open and close is also a NodeEvent (the node's audit trail)."""

from django.db import models
from django.db.models import Q


class NodeAlert(models.Model):
    node = models.ForeignKey("provisioning.Node", on_delete=models.CASCADE, related_name="alerts")
    name = models.CharField(max_length=120, help_text="The rule's alertname, e.g. GpuXidError.")
    fingerprint = models.CharField(
        max_length=64, help_text="Alertmanager's fingerprint of the alert's labels: the same alert "
                                 "firing again is the same open row.")
    severity = models.CharField(max_length=20, blank=True)
    summary = models.TextField(blank=True)
    labels = models.JSONField(default=dict, blank=True)
    started_at = models.DateTimeField(help_text="When Prometheus says the alert began firing.")
    opened_at = models.DateTimeField(auto_now_add=True)
    resolved_at = models.DateTimeField(null=True, blank=True, db_index=True)

    class Meta:
        app_label = "provisioning"
        ordering = ["-started_at", "-pk"]
        constraints = [models.UniqueConstraint(fields=["fingerprint"], condition=Q(resolved_at=None),
                                               name="one_open_alert_per_fingerprint")]
        indexes = [models.Index(fields=["node", "resolved_at"], name="nodealert_node_open")]

    def __str__(self) -> str:
        return f"{self.name} on {self.node_id} ({'resolved' if self.resolved_at else 'open'})"
