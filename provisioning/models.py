from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import models
from django.db.models import F
from django.db.models.functions import Lower

from portal.core.models import TransitionEvent
from provisioning.drivers import secret_option_paths
from provisioning.states import NodeState, RunKind, RunStatus, StepStatus, WipeMethod, wipe_method_problem


def _default_driver() -> str:
    return settings.DEFAULT_NODE_DRIVER


class NodeQuerySet(models.QuerySet):
    def ready(self):
        """Nodes in stock, which an order may take now: the one rule of "ready" (inventory's)."""
        return self.filter(state=NodeState.READY)


class Node(models.Model):
    """A bare-metal server in inventory. Its state changes only through
    ``provisioning.transitions.node_transition`` (one table: ``provisioning.states``)."""

    hostname = models.CharField(max_length=120, unique=True)
    sku = models.ForeignKey("catalog.ServerSKU", on_delete=models.PROTECT, related_name="nodes")
    management_address = models.CharField(max_length=255,
                                          help_text="host or host:port the driver connects to")
    driver = models.CharField(max_length=32, default=_default_driver,
                              help_text="A key of settings.NODE_DRIVERS: simulated, ssh, …")
    driver_options = models.JSONField(default=dict, blank=True,
                                      help_text="Per-node driver options (no secrets).")
    fabric_group = models.CharField(max_length=60, blank=True, db_index=True,
                                    help_text="Nodes of one cluster order share a fabric group.")
    fabric_address = models.CharField(
        max_length=255, blank=True,
        help_text="The node's address on the cluster fabric (InfiniBand / RoCE / data network): "
                  "a cluster's MASTER_ADDR and NCCL interface. Not the management address.")
    nvme_devices = models.JSONField(default=list, blank=True,
                                    help_text='e.g. ["/dev/nvme0n1", "/dev/nvme1n1"]')
    wipe_method = models.CharField(
        max_length=16, choices=WipeMethod.choices, default=WipeMethod.FILES,
        help_text="How the hand-back erases the node's data between tenants.")
    baseline = models.JSONField(
        default=list, blank=True,
        help_text="The clean node's inventory (stack/sh/inventory.sh), recorded when it entered "
                  "stock; the hand-back attestation compares the node with it.")
    baseline_at = models.DateTimeField(null=True, blank=True)
    notes = models.TextField(blank=True)
    state = models.CharField(max_length=20, choices=NodeState.choices, default=NodeState.ENROLLED,
                             db_index=True)
    state_changed_at = models.DateTimeField(auto_now_add=True)
    order = models.ForeignKey("orders.Order", null=True, blank=True, on_delete=models.SET_NULL,
                              related_name="nodes", help_text="The order this node serves.")
    reserved_until = models.DateTimeField(null=True, blank=True)
    fence = models.PositiveBigIntegerField(
        default=0, help_text="The last fencing token issued for work on this node; the node "
                             "refuses an operation that carries an older one.")
    created_at = models.DateTimeField(auto_now_add=True)
    # The latest health check, kept on the row (written with each check, in its transaction) so
    # the inventory reads a node's health without touching its history of checks.
    health_ok = models.BooleanField(null=True, blank=True,
                                    help_text="Whether the latest health check passed; empty "
                                              "until the first check.")
    health_checked_at = models.DateTimeField(null=True, blank=True)
    health_failures = models.PositiveIntegerField(
        default=0, help_text="Failed health checks in a row up to the latest (0 when it passed).")

    objects = NodeQuerySet.as_manager()

    class Meta:
        ordering = ["hostname"]
        indexes = [models.Index(fields=["sku", "state"]),
                   models.Index(fields=["state", "hostname"], name="node_state_hostname")]
        constraints = [
            # DNS names are case-insensitive: gpu-a01 and GPU-A01 are one machine.
            models.UniqueConstraint(Lower("hostname"), name="node_hostname_unique_ci"),
        ]

    def __str__(self) -> str:
        return self.hostname

    def clean(self) -> None:
        if problem := wipe_method_problem(self.wipe_method, self.nvme_devices):
            raise ValidationError({"wipe_method": problem})
        if secrets := secret_option_paths(self.driver_options):
            raise ValidationError({"driver_options": (
                f"{', '.join(secrets)}: secrets are not stored in driver options (a plain-text "
                f"column); give the driver its key through SSH_PRIVATE_KEY_FILE and the BMC "
                f"password through IPMI_PASSWORD_FILE.")})


class NodeEvent(TransitionEvent):
    node = models.ForeignKey(Node, on_delete=models.CASCADE, related_name="events")
    from_state = models.CharField(max_length=20, choices=NodeState.choices)
    to_state = models.CharField(max_length=20, choices=NodeState.choices)
    order = models.ForeignKey("orders.Order", null=True, blank=True, on_delete=models.SET_NULL,
                              related_name="+")

    class Meta(TransitionEvent.Meta):
        # The node page reads a node's latest events, newest first, a page at a time.
        indexes = [models.Index("node", F("at").desc(), F("id").desc(), name="nodeevent_node_latest")]

    def __str__(self) -> str:
        return f"{self.node}: {self.from_state} → {self.to_state}"


class ProvisioningRun(models.Model):
    """One piece of background work on an order's nodes: provision, terminate, reboot, …
    Its status changes only through ``provisioning.transitions.run_transition``."""

    order = models.ForeignKey("orders.Order", on_delete=models.CASCADE, related_name="runs")
    kind = models.CharField(max_length=20, choices=RunKind.choices)
    status = models.CharField(max_length=12, choices=RunStatus.choices, default=RunStatus.PENDING,
                              db_index=True)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True,
                                   on_delete=models.SET_NULL, related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    error = models.TextField(blank=True)
    queue_error = models.TextField(
        blank=True, help_text="Why queueing this run's work failed (broker down); the sweeper "
                              "queues it again and clears this.")

    class Meta:
        ordering = ["-created_at", "-pk"]

    def __str__(self) -> str:
        return f"{self.get_kind_display()} #{self.pk} of {self.order}"


class RunEvent(TransitionEvent):
    """The audit trail of a run: who moved it from which status to which, when, and why."""

    run = models.ForeignKey(ProvisioningRun, on_delete=models.CASCADE, related_name="events")
    from_state = models.CharField(max_length=12, choices=RunStatus.choices)
    to_state = models.CharField(max_length=12, choices=RunStatus.choices)

    def __str__(self) -> str:
        return f"run {self.run_id}: {self.from_state} → {self.to_state}"


class StepRun(models.Model):
    """One step of a run on one node. The (run, node, step) key makes each step happen once."""

    run = models.ForeignKey(ProvisioningRun, on_delete=models.CASCADE, related_name="steps")
    node = models.ForeignKey(Node, on_delete=models.PROTECT, related_name="step_runs")
    step = models.CharField(max_length=32)
    position = models.PositiveSmallIntegerField()
    status = models.CharField(max_length=12, choices=StepStatus.choices,
                              default=StepStatus.PENDING, db_index=True)
    attempts = models.PositiveSmallIntegerField(default=0)
    executions = models.PositiveIntegerField(
        default=0, help_text="Executions ever started (never reset): labels the log lines.")
    started_at = models.DateTimeField(null=True, blank=True)
    claimed_at = models.DateTimeField(
        null=True, blank=True, help_text="When the current execution started; the deadline "
                                         "counts from here.")
    finished_at = models.DateTimeField(null=True, blank=True)
    claimed_by = models.CharField(max_length=64, blank=True,
                                  help_text="Token of the task execution holding the step.")
    lease_expires_at = models.DateTimeField(null=True, blank=True)
    fence = models.PositiveBigIntegerField(
        default=0, help_text="Fencing token of the current execution (from Node.fence).")
    stop_requested = models.BooleanField(
        default=False, help_text="A later run needs the node: the execution stops.")
    retry_at = models.DateTimeField(null=True, blank=True)
    error = models.TextField(blank=True, help_text="Why the last attempt failed, for staff.")
    result = models.JSONField(default=dict, blank=True)

    class Meta:
        ordering = ["run", "node", "position"]
        constraints = [
            models.UniqueConstraint(fields=["run", "node", "step"], name="one_steprun_per_run_node_step"),
        ]
        indexes = [models.Index(fields=["status", "lease_expires_at"])]

    def __str__(self) -> str:
        return f"{self.step} on {self.node_id} ({self.status})"


class StepLogLine(models.Model):
    """Output of a step, line by line, as the driver streamed it."""

    step_run = models.ForeignKey(StepRun, on_delete=models.CASCADE, related_name="log_lines")
    at = models.DateTimeField()
    attempt = models.PositiveSmallIntegerField(default=1, help_text="The execution number.")
    text = models.TextField()
    # The full text of a retry or failure (driver messages, addresses) is for staff; the customer's
    # progress card shows the summary line written beside it.
    staff_only = models.BooleanField(default=False)

    class Meta:
        ordering = ["pk"]

    def __str__(self) -> str:
        return self.text[:80]


class HealthCheck(models.Model):
    node = models.ForeignKey(Node, on_delete=models.CASCADE, related_name="health_checks")
    at = models.DateTimeField(auto_now_add=True, db_index=True)
    ok = models.BooleanField()
    gpu_count = models.PositiveSmallIntegerField(null=True, blank=True)
    expected_gpu_count = models.PositiveSmallIntegerField()
    max_temperature_c = models.DecimalField(max_digits=5, decimal_places=1, null=True, blank=True)
    ecc_errors = models.PositiveIntegerField(null=True, blank=True)
    problems = models.JSONField(default=list, blank=True, help_text="Readable findings.")
    raw = models.TextField(blank=True)

    class Meta:
        ordering = ["-at", "-pk"]
        get_latest_by = "at"
        # Retention asks, for each old check, whether its node has a newer one; a node's latest
        # checks (node page, the order's health) are read without sorting its history.
        indexes = [models.Index(fields=["node", "at"], name="healthcheck_node_at"),
                   models.Index("node", F("at").desc(), F("id").desc(), name="healthcheck_node_latest")]

    def __str__(self) -> str:
        return f"{self.node} {'ok' if self.ok else 'unhealthy'} at {self.at:%Y-%m-%d %H:%M}"

    @property
    def unreachable(self) -> bool:
        """The driver could not reach the node: nothing was measured."""
        return not self.ok and self.gpu_count is None


class HealthCheckDaily(models.Model):
    """One node's health checks of one day (UTC), summarised once the day is over: what stays of
    them after the checks themselves are deleted (``provisioning.retention``)."""

    class Worst(models.TextChoices):
        # In rising order of concern: an unhealthy check measured a fault; an unreachable one
        # measured nothing.
        OK = "ok", "OK"
        UNREACHABLE = "unreachable", "Unreachable"
        UNHEALTHY = "unhealthy", "Unhealthy"

    node = models.ForeignKey(Node, on_delete=models.CASCADE, related_name="health_days")
    day = models.DateField()
    checks = models.PositiveIntegerField()
    ok_count = models.PositiveIntegerField()
    failed_count = models.PositiveIntegerField(help_text="Checks that were not ok.")
    unreachable_count = models.PositiveIntegerField(
        help_text="Of the failed checks, those whose driver could not reach the node.")
    worst = models.CharField(max_length=12, choices=Worst.choices)
    max_temperature_c = models.DecimalField(max_digits=5, decimal_places=1, null=True, blank=True)
    max_ecc_errors = models.PositiveIntegerField(null=True, blank=True)
    min_gpu_count = models.PositiveSmallIntegerField(
        null=True, blank=True, help_text="The fewest GPUs a check of the day saw.")

    class Meta:
        ordering = ["-day", "node"]
        constraints = [
            models.UniqueConstraint(fields=["node", "day"], name="one_health_summary_per_node_and_day"),
            models.CheckConstraint(condition=models.Q(checks=models.F("ok_count") + models.F("failed_count")),
                                   name="health_summary_counts_add_up"),
        ]
        indexes = [models.Index(fields=["day"], name="healthcheckdaily_day")]

    def __str__(self) -> str:
        return f"{self.node} {self.day}: {self.ok_count}/{self.checks} ok ({self.worst})"

from provisioning.monitoring.models import NodeAlert  # noqa: E402,F401
from provisioning.storage.models import Bucket, BucketEvent, Credential  # noqa: E402,F401
