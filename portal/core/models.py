"""What every audit trail of a state machine records (orders, nodes, runs, buckets)."""

from django.conf import settings
from django.db import models


class TransitionEvent(models.Model):
    """One move of a state machine: who (empty when the system acted: policy, worker, beat),
    when, which transition, and why. Subclasses add the row they audit and typed states."""

    at = models.DateTimeField(auto_now_add=True)
    actor = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True,
                              on_delete=models.SET_NULL, related_name="+",
                              help_text="Empty when the system acted (policy, worker, beat).")
    transition = models.CharField(max_length=40)
    note = models.TextField(blank=True)

    class Meta:
        abstract = True
        ordering = ["at", "pk"]
