"""What each step does: one function per step, each returning its own typed result."""

from provisioning.pipeline.steps.acceptance import acceptance
from provisioning.pipeline.steps.access import access
from provisioning.pipeline.steps.configure import configure
from provisioning.pipeline.steps.deploy_os import deploy_os
from provisioning.pipeline.steps.handover import handover
from provisioning.pipeline.steps.reboot import reboot
from provisioning.pipeline.steps.reserve import reserve
from provisioning.pipeline.steps.stack import stack
from provisioning.pipeline.steps.storage import rotate_storage_key, storage
from provisioning.pipeline.steps.terminate import (
    attest,
    ready,
    retain_data,
    revoke_access,
    revoke_keys,
    sanitise,
)

STEP_FUNCTIONS = {
    "reserve": reserve, "deploy_os": deploy_os, "configure": configure, "storage": storage,
    "stack": stack, "acceptance": acceptance, "handover": handover,
    "revoke_access": revoke_access, "retain_data": retain_data, "revoke_keys": revoke_keys,
    "sanitise": sanitise, "attest": attest, "ready": ready, "reboot": reboot,
    "rotate_storage_key": rotate_storage_key, "access": access,
}
