"""Writes on the node inventory: enrolment, acceptance into stock, maintenance, edits, a
recorded baseline, retirement and power requests. Every node move goes through ``node_transition``
(tables in ``provisioning.states``) inside ``transaction.atomic()`` with a history row; work for
workers is queued on commit (``provisioning.pipeline.enqueue``)."""

from __future__ import annotations

from django.conf import settings
from django.db import IntegrityError, transaction

from portal.core.states import DomainError, actor_or_none
from provisioning.drivers import driver_names, secret_option_paths
from provisioning.inventory.enrolment import EnrolmentRefused, enrolment_problems
from provisioning.inventory.node_power import NODE_POWER_ACTIONS, node_power_refusal
from provisioning.models import Node, NodeEvent
from provisioning.permissions import require_operator
from provisioning.pipeline.enqueue import (
    enqueue_baseline_record,
    enqueue_node_accept_check,
    enqueue_node_power,
)
from provisioning.states import (
    HANDBACK_FAILED,
    NODE_TRANSITIONS,
    NodeState,
    WipeMethod,
    wipe_method_problem,
)
from provisioning.transitions import node_transition


# --- nodes ------------------------------------------------------------------------------------
def node_enrol(*, by, sku, hostname: str, management_address: str, driver: str | None = None,
               fabric_group: str = "", nvme_devices=(), driver_options: dict | None = None,
               fabric_address: str = "", wipe_method: str | None = None,
               notes: str = "", ready: bool = False) -> Node:
    """Adds a server to inventory (enrolled; ``ready=True`` also accepts it into stock).
    ``wipe_method``: how the hand-back erases its data (the enrol page asks for it explicitly;
    callers that leave it out get blkdiscard with recorded devices, else the data directory)."""
    require_operator(by)
    hostname = hostname.strip()
    if not hostname or not management_address.strip():
        raise DomainError("A node needs a hostname and a management address.")
    driver = driver or settings.DEFAULT_NODE_DRIVER
    if driver not in driver_names():
        raise DomainError(f"Unknown driver {driver!r}; choose one of {', '.join(driver_names())}.")
    already = DomainError(f"A node named {hostname} is already enrolled (hostnames are "
                          f"case-insensitive).")
    if Node.objects.filter(hostname__iexact=hostname).exists():
        raise already
    if secrets := secret_option_paths(driver_options or {}):
        raise DomainError(f"{', '.join(secrets)}: secrets are not stored in driver options (a "
                          f"plain-text column); give the driver its key through "
                          f"SSH_PRIVATE_KEY_FILE and the BMC password through IPMI_PASSWORD_FILE.")
    if wipe_method is None:
        wipe_method = WipeMethod.DISCARD if nvme_devices else WipeMethod.FILES
    problems = enrolment_problems(hostname=hostname, management_address=management_address,
                                  driver=driver, driver_options=driver_options)
    if problem := wipe_method_problem(wipe_method, nvme_devices):
        problems["wipe_method"] = problem
    if problems:
        raise EnrolmentRefused(problems)
    with transaction.atomic():
        try:
            with transaction.atomic():  # an enrolment racing this one may take the name first
                node = Node.objects.create(
                    hostname=hostname, sku=sku, management_address=management_address.strip(),
                    driver=driver, fabric_group=fabric_group.strip(), nvme_devices=list(nvme_devices),
                    fabric_address=fabric_address.strip(), wipe_method=wipe_method,
                    driver_options=driver_options or {}, notes=notes, state=NodeState.ENROLLED,
                )
        except IntegrityError:
            if Node.objects.filter(hostname__iexact=hostname).exists():
                raise already from None
            raise
        NodeEvent.objects.create(node=node, actor=actor_or_none(by),
                                 transition="enrol", from_state=NodeState.ENROLLED,
                                 to_state=NodeState.ENROLLED, note="enrolled")
        if ready:  # stock only once the driver reached it and its health check passed
            enqueue_node_accept_check(node, by)
    return node


def node_accept(*, node: Node, by, note: str = "") -> Node:
    """Asks for the node's acceptance check (reachability and health through its driver, in a
    worker); the node stays enrolled, out of stock, until the check passes."""
    require_operator(by)
    if not NODE_TRANSITIONS.get("accept").allowed_from(node.state):
        raise DomainError(f"{node.hostname} is {node.get_state_display().lower()}; only an enrolled "
                          f"node is checked and accepted into stock.")
    enqueue_node_accept_check(node, by)
    return node


def node_set_maintenance(*, node: Node, by, note: str = "") -> Node:
    """Takes a node out of stock (from enrolled, ready or a failed state)."""
    require_operator(by)
    if node.state in HANDBACK_FAILED and node.order_id:
        raise DomainError(f"The hand-back of order {node.order.reference} did not finish on "
                          f"{node.hostname}: fix the cause and retry the step from the run page. A "
                          f"node goes into maintenance (and back to stock) only once it is clean.")
    if node.state in {NodeState.RESERVED, NodeState.ACTIVE} and node.order_id:
        raise DomainError(f"{node.hostname} serves order {node.order.reference}; swap or terminate "
                          f"it before maintenance.")
    return node_transition(node=node, name="enter_maintenance", by=by, note=note,
                           order_id=None, reserved_until=None)


def node_return_to_service(*, node: Node, by, note: str = "") -> Node:
    """Asks for the check a node must pass to go from maintenance back into stock (reachability
    and health through its driver, in a worker); it stays in maintenance until it passes."""
    require_operator(by)
    if not NODE_TRANSITIONS.get("return_to_service").allowed_from(node.state):
        raise DomainError(f"{node.hostname} is {node.get_state_display().lower()}; only a node in "
                          f"maintenance is checked and returned to service.")
    enqueue_node_accept_check(node, by)
    return node


# Driver options that decide what the clean baseline lists (the customer login's home, whether the
# machine's accounts and sockets are listed): changing one makes the baseline moot.
BASELINE_OPTIONS = ("login_user", "test_host")


# What an operator may change on a node; the hostname, SKU and driver stay (enrol anew instead).
EDITABLE_NODE_FIELDS = ("management_address", "fabric_group", "fabric_address", "nvme_devices",
                        "wipe_method", "driver_options", "notes")


def node_update(*, node: Node, by, **changes) -> Node:
    """Operators: changes a node's enrolment facts (address, fabric, data devices and wipe
    method, driver options such as the pinned host key and BMC), checked as at enrolment, with
    an audit event naming what changed. Not while it serves an order."""
    require_operator(by)
    unknown = set(changes) - set(EDITABLE_NODE_FIELDS)
    if unknown:
        raise DomainError(f"{', '.join(sorted(unknown))} cannot be changed; enrol the node anew.")
    with transaction.atomic():
        node = Node.objects.select_for_update().get(pk=node.pk)
        if node.order_id is not None:
            raise DomainError(f"{node.hostname} serves order {node.order.reference}: change it once "
                              f"the order has released it.")
        if secrets := secret_option_paths(changes.get("driver_options") or {}):
            raise DomainError(f"{', '.join(secrets)}: secrets are not stored in driver options.")
        after = {name: changes.get(name, getattr(node, name)) for name in EDITABLE_NODE_FIELDS}
        problems = enrolment_problems(hostname=node.hostname,
                                      management_address=after["management_address"],
                                      driver=node.driver, driver_options=after["driver_options"])
        if problem := wipe_method_problem(after["wipe_method"], after["nvme_devices"]):
            problems["wipe_method"] = problem
        if problems:
            raise EnrolmentRefused(problems)
        changed = [name for name in EDITABLE_NODE_FIELDS if after[name] != getattr(node, name)]
        if not changed:
            return node
        before_options = node.driver_options
        for name in changed:
            setattr(node, name, after[name])
        fields, note = list(changed), "changed: " + ", ".join(n.replace("_", " ") for n in changed)
        if any((before_options or {}).get(k) != (node.driver_options or {}).get(k)
               for k in BASELINE_OPTIONS):  # the baseline listed another account's home
            node.baseline, node.baseline_at = [], None
            fields += ["baseline", "baseline_at"]
            note += "; the clean baseline is recorded again at the next deploy"
        node.save(update_fields=fields)
        NodeEvent.objects.create(node=node, actor=actor_or_none(by), transition="edit",
                                 from_state=node.state, to_state=node.state, note=note)
    return node


def node_record_baseline(*, node: Node, by, note: str = "") -> Node:
    """Operators: for a node that has no clean baseline (it entered stock before baselines were
    recorded), records what it holds now as clean, in a worker, after they checked it by hand;
    then its hand-back's attestation can be retried. Audited."""
    require_operator(by)
    if node.baseline_at is not None:
        raise DomainError(f"{node.hostname} has a clean baseline (recorded "
                          f"{node.baseline_at:%Y-%m-%d %H:%M}); a new one is recorded when it "
                          f"returns to service.")
    enqueue_baseline_record(node, by, note)
    return node


def node_retire(*, node: Node, by, note: str = "") -> Node:
    """Operators: takes a node out of the fleet for good (its history stays)."""
    require_operator(by)
    if node.order_id is not None:
        raise DomainError(f"{node.hostname} serves order {node.order.reference}: it can be retired "
                          f"once the order has released it.")
    return node_transition(node=node, name="retire", by=by, note=note, reserved_until=None)


# --- power (operators) -------------------------------------------------------------------------
def node_power_request(*, node: Node, by, action: str, note: str = "") -> NodeEvent:
    """Operators: asks for power on, off or cycle of ``node``; audited now, done by a worker."""
    require_operator(by)
    if action not in NODE_POWER_ACTIONS:
        raise DomainError(f"Unknown power action {action!r}: on, off or cycle.")
    if problem := node_power_refusal(node):
        raise DomainError(problem)
    with transaction.atomic():
        event = NodeEvent.objects.create(
            node=node, actor=actor_or_none(by), transition=f"power_{action}_requested",
            from_state=node.state, to_state=node.state, note=note[:500])
        enqueue_node_power(node, by, action)
    return event
