"""The shell scripts the pipeline runs on a node for Trainyard itself (the training stack's files
are rendered by ``provisioning.stack.bundle``; the disk layout by ``provisioning.stack.disk``):
the node tools at deploy, and the hand-back at termination. Each is a ``.sh`` file in ``sh/``
(``provisioning.stack.shell``); what it acts on comes in the environment built here.

Scripts read ``TRAINYARD_*`` variables the pipeline sets and honour ``TRAINYARD_ROOT`` (tests
run them against a scratch root).
"""

from __future__ import annotations

from provisioning.stack.bootstrap import requirements_key
from provisioning.stack.packages import TOOLS_PACKAGES
from provisioning.stack.paths import ORDER_UNITS
from provisioning.stack.shell import node_script

# Exit status of node_tools.sh when the node has no python3 (with venv): permanent.
NO_PYTHON = 3


def node_tools_script() -> str:
    return node_script("node_tools")


def node_tools_env() -> dict[str, str]:
    return {"TRAINYARD_TOOLS_REQUIREMENTS": " ".join(TOOLS_PACKAGES),
            "TRAINYARD_TOOLS_KEY": requirements_key(TOOLS_PACKAGES)}


def revoke_access_script() -> str:
    return node_script("revoke_access", libs=("customer_account", "end_customer_processes"))


def sanitise_script() -> str:
    return node_script("sanitise", libs=("customer_account", "end_customer_processes",
                                         "release_device", "walk"),
                       values={"TRAINYARD_ORDER_UNITS": ORDER_UNITS})


def inventory_script() -> str:
    return node_script("inventory", libs=("customer_account", "walk"))


def handback_env(*, login_user: str, wipe_method: str, devices) -> dict[str, str]:
    """What the hand-back scripts act on: the customer's account and the data to wipe."""
    return {"TRAINYARD_LOGIN_USER": login_user, "TRAINYARD_WIPE_METHOD": wipe_method,
            "TRAINYARD_DATA_DEVICES": " ".join(devices or ())}
