"""The node and run state machines, step statuses, and the pipeline's step list. No I/O here."""

from __future__ import annotations

from dataclasses import dataclass

from django.db import models

from portal.core.states import Transition, TransitionTable


class NodeState(models.TextChoices):
    ENROLLED = "enrolled", "Enrolled"
    READY = "ready", "Ready"
    RESERVED = "reserved", "Reserved"
    DEPLOYING = "deploying", "Deploying OS"
    CONFIGURING = "configuring", "Configuring"
    VALIDATING = "validating", "Validating"
    ACTIVE = "active", "Active"
    RELEASING = "releasing", "Releasing"
    WIPING = "wiping", "Wiping"
    MAINTENANCE = "maintenance", "Maintenance"
    FAILED_DEPLOY = "failed_deploy", "Failed: deploy"
    FAILED_VALIDATION = "failed_validation", "Failed: validation"
    FAILED_WIPE = "failed_wipe", "Failed: wipe"
    # The hand-back's attestation found something of the last tenant: never back in stock so.
    FAILED_ATTESTATION = "failed_attest", "Needs attention: hand-back"
    RETIRED = "retired", "Retired"


class WipeMethod(models.TextChoices):
    """How the hand-back erases a node's data (``stack/sh/sanitise.sh``), declared at enrolment."""

    DISCARD = "discard", "Discard the data devices (blkdiscard)"
    ZERO = "zero", "Write zeros (blkdiscard -z)"
    SECURE_ERASE = "secure_erase", "NVMe secure erase (nvme format)"
    FILES = "files", "No local data devices (empty /data)"


DEVICE_WIPE_METHODS = frozenset({WipeMethod.DISCARD, WipeMethod.ZERO, WipeMethod.SECURE_ERASE})


def wipe_method_problem(method: str, devices) -> str | None:
    """A device method needs recorded devices; 'files' needs none."""
    if method not in WipeMethod.values:
        return f"Choose how the node's data is erased ({', '.join(WipeMethod.values)})."
    if method in DEVICE_WIPE_METHODS and not devices:
        return ("Record the node's data devices for this wipe method, or choose "
                "'No local data devices'.")
    if method == WipeMethod.FILES and devices:
        return ("Data devices are recorded: choose how they are erased (discard, zeros or "
                "secure erase), or remove them.")
    return None


N = NodeState
NODE_TERMINAL = frozenset({N.RETIRED})  # out of the fleet for good: no move leaves it
NODE_FAILED = frozenset({N.FAILED_DEPLOY, N.FAILED_VALIDATION, N.FAILED_WIPE, N.FAILED_ATTESTATION})
# A hand-back that did not finish: the node may still hold the last tenant's data.
HANDBACK_FAILED = frozenset({N.FAILED_WIPE, N.FAILED_ATTESTATION})

NODE_TRANSITIONS = TransitionTable("node", [
    Transition("accept", frozenset({N.ENROLLED}), N.READY, "Accepted into stock"),
    Transition("reserve", frozenset({N.READY}), N.RESERVED, "Reserved"),
    Transition("unreserve", frozenset({N.RESERVED}), N.READY, "Reservation released"),
    Transition("deploy", frozenset({N.RESERVED, N.FAILED_DEPLOY}), N.DEPLOYING,
               "OS deployment started"),
    Transition("configure", frozenset({N.DEPLOYING, N.FAILED_DEPLOY, N.ACTIVE}), N.CONFIGURING,
               "Configuration started"),
    Transition("validate", frozenset({N.CONFIGURING, N.FAILED_VALIDATION}), N.VALIDATING,
               "Validation started"),
    Transition("activate", frozenset({N.VALIDATING}), N.ACTIVE, "Handed over"),
    Transition("fail_deploy", frozenset({N.DEPLOYING, N.CONFIGURING}), N.FAILED_DEPLOY,
               "Deployment failed"),
    Transition("fail_validation", frozenset({N.VALIDATING}), N.FAILED_VALIDATION,
               "Validation failed"),
    Transition("release", frozenset({N.RESERVED, N.DEPLOYING, N.CONFIGURING, N.VALIDATING,
                                     N.ACTIVE, *NODE_FAILED}), N.RELEASING, "Release started"),
    Transition("wipe", frozenset({N.RELEASING, N.FAILED_WIPE, N.FAILED_ATTESTATION}), N.WIPING,
               "Wipe started"),
    Transition("return_to_stock", frozenset({N.WIPING}), N.READY, "Wiped and back in stock"),
    Transition("fail_wipe", frozenset({N.RELEASING, N.WIPING}), N.FAILED_WIPE, "Wipe failed"),
    Transition("fail_attestation", frozenset({N.WIPING}), N.FAILED_ATTESTATION,
               "Attestation found the last tenant's traces"),
    Transition("enter_maintenance", frozenset({N.ENROLLED, N.READY, *NODE_FAILED}),
               N.MAINTENANCE, "Put into maintenance"),
    Transition("return_to_service", frozenset({N.MAINTENANCE}), N.READY, "Returned to service"),
    # Out of the fleet for good (sold, broken beyond repair); its history stays.
    Transition("retire", frozenset({N.ENROLLED, N.READY, N.MAINTENANCE, *NODE_FAILED}), N.RETIRED,
               "Retired"),
], labels=dict(NodeState.choices))


class RunKind(models.TextChoices):
    PROVISION = "provision", "Provisioning"
    TERMINATE = "terminate", "Termination"
    REBOOT = "reboot", "Reboot"
    REDEPLOY_STACK = "redeploy_stack", "Re-deploy training stack"
    ROTATE_STORAGE_KEY = "rotate_storage_key", "Rotate bucket key"
    SYNC_KEYS = "sync_keys", "Install SSH keys"


class RunStatus(models.TextChoices):
    PENDING = "pending", "Pending"
    RUNNING = "running", "Running"
    SUCCEEDED = "succeeded", "Succeeded"
    FAILED = "failed", "Failed"
    CANCELLED = "cancelled", "Cancelled"


R = RunStatus
RUN_TRANSITIONS = TransitionTable("run", [
    Transition("start", frozenset({R.PENDING}), R.RUNNING, "Started"),
    Transition("succeed", frozenset({R.RUNNING}), R.SUCCEEDED, "Succeeded"),
    Transition("fail", frozenset({R.RUNNING}), R.FAILED, "Failed"),
    # Staff retried a failed step or swapped a failed node: the run works again.
    Transition("resume", frozenset({R.FAILED}), R.RUNNING, "Resumed"),
    Transition("cancel", frozenset({R.PENDING, R.RUNNING}), R.CANCELLED, "Cancelled"),
], labels=dict(RunStatus.choices))
RUN_OPEN = frozenset({R.PENDING, R.RUNNING})
RUN_DONE = frozenset({R.SUCCEEDED, R.FAILED, R.CANCELLED})


class StepStatus(models.TextChoices):
    PENDING = "pending", "Pending"
    RUNNING = "running", "Running"
    RETRYING = "retrying", "Waiting to retry"
    SUCCEEDED = "succeeded", "Succeeded"
    FAILED = "failed", "Failed"
    SKIPPED = "skipped", "Skipped (node swapped)"


STEP_DONE = frozenset({StepStatus.SUCCEEDED, StepStatus.SKIPPED})


@dataclass(frozen=True)
class StepSpec:
    name: str
    label: str
    enter: str | None = None  # node transition applied when the step starts
    on_success: str | None = None  # node transition applied when it succeeds
    on_failure: str | None = None  # node transition applied when it fails for good


_PROVISION = (
    StepSpec("reserve", "Reserve node"),
    StepSpec("deploy_os", "Deploy OS", enter="deploy", on_failure="fail_deploy"),
    StepSpec("configure", "Configure", enter="configure", on_failure="fail_deploy"),
    StepSpec("storage", "Object storage", enter="configure", on_failure="fail_deploy"),
    StepSpec("stack", "Training stack", enter="configure", on_failure="fail_deploy"),
    StepSpec("access", "SSH keys", enter="configure", on_failure="fail_deploy"),
    StepSpec("acceptance", "Acceptance test", enter="validate", on_failure="fail_validation"),
    StepSpec("handover", "Handover", enter="validate", on_success="activate",
             on_failure="fail_validation"),
)
# The hand-back: the customer's access ends first; then the checkpoints go to the order's bucket
# (kept until its date, copied with Trainyard's own access) before the bucket keys are revoked and
# long before anything is removed; then everything of the tenant is removed and an attestation
# against the node's clean baseline decides whether it goes back to stock.
_TERMINATE = (
    StepSpec("revoke_access", "End SSH access", enter="release", on_failure="fail_wipe"),
    StepSpec("retain_data", "Keep checkpoints", enter="release", on_failure="fail_wipe"),
    StepSpec("revoke_keys", "Revoke bucket keys", enter="release", on_failure="fail_wipe"),
    StepSpec("sanitise", "Remove tenant data", enter="wipe", on_failure="fail_wipe"),
    StepSpec("attest", "Check nothing is left", enter="wipe", on_failure="fail_attestation"),
    StepSpec("ready", "Back in stock", enter="wipe", on_success="return_to_stock",
             on_failure="fail_wipe"),
)
# Day 2 runs work on an active server and leave the order active; failures show on run and node.
_REBOOT = (StepSpec("reboot", "Reboot"),)
_REDEPLOY_STACK = tuple(s for s in _PROVISION if s.name in ("stack", "acceptance", "handover"))
_ROTATE_STORAGE_KEY = (StepSpec("rotate_storage_key", "Rotate bucket key"),)
_SYNC_KEYS = (StepSpec("access", "Install SSH keys"),)

STEPS: dict[str, tuple[StepSpec, ...]] = {
    RunKind.PROVISION: _PROVISION,
    RunKind.TERMINATE: _TERMINATE,
    RunKind.REBOOT: _REBOOT,
    RunKind.REDEPLOY_STACK: _REDEPLOY_STACK,
    RunKind.ROTATE_STORAGE_KEY: _ROTATE_STORAGE_KEY,
    RunKind.SYNC_KEYS: _SYNC_KEYS,
}


def step_spec(kind: str, name: str) -> StepSpec:
    for spec in STEPS[kind]:
        if spec.name == name:
            return spec
    raise ValueError(f"a {kind} run has no step {name!r}")
