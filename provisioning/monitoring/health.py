"""GPU health: the limits (one place) and the periodic check of a node (I/O: call from a task)."""

from __future__ import annotations

from django.db import transaction
from django.db.models import F

from portal.accounts.staff_notifications import OPERATORS, staff_notify_later
from provisioning.drivers import (
    DriverError,
    HealthReport,
    driver_for,
    driver_options,
    is_test_host,
    split_address,
)
from provisioning.inventory.baseline import baseline_record
from provisioning.models import HealthCheck, Node, NodeEvent
from provisioning.states import NodeState
from provisioning.transitions import node_transition
from provisioning.webhooks import UNREACHABLE, UNREACHABLE_TEXT, health_degraded_publish

TEST_HOST_NOTE = "declared test host: no GPUs by declaration, GPU checks skipped"
NOT_AVAILABLE = "not available in its imaging engine: "
# Above this a GPU is too hot: the periodic health check reports it and acceptance fails it.
MAX_GPU_TEMPERATURE_C = 85.0


def gpu_too_hot(temperature_c: float | None) -> bool:
    return temperature_c is not None and temperature_c > MAX_GPU_TEMPERATURE_C


def health_problems(report: HealthReport, *, expected_gpus: int) -> list[str]:
    """What is wrong with a node according to ``report``, in words an operator and a customer
    read (counts and temperatures; nothing of the driver's own output)."""
    problems = []
    if report.gpu_count != expected_gpus:
        problems.append(f"{report.gpu_count} of {expected_gpus} GPUs visible")
    if gpu_too_hot(report.max_temperature_c):
        problems.append(f"GPU temperature {report.max_temperature_c:.0f} °C "
                        f"(limit {MAX_GPU_TEMPERATURE_C:.0f} °C)")
    if report.ecc_errors:
        problems.append(f"{report.ecc_errors} uncorrected ECC error(s)")
    return problems


DRIVER_ERROR = "driver error: "


def unreachable_diagnosis(node: Node, message: str) -> str:
    """What an operator reads when the driver could not reach ``node``: where it tried (address,
    port, driver) and the driver's own words. Never shown to customers (``UNREACHABLE_TEXT``)."""
    try:
        host, port = split_address(node.management_address, int(driver_options(node).get("port", 22)))
        where = f"{host} port {port}"
    except (DriverError, ValueError):
        where = node.management_address or "no management address"
    return f"could not reach {where} with the {node.driver} driver: {message}"


def node_health_check(*, node: Node) -> HealthCheck:
    """Asks the node's driver for GPU health and stores what it said (I/O: call from a task). A
    node waiting to enter stock whose imaging engine erases it has no system of ours to ask: the
    engine's word that it is available stands in (its GPUs are checked by each order's
    acceptance)."""
    node = Node.objects.select_related("sku__gpu").get(pk=node.pk)
    expected = node.sku.gpu_count
    try:
        driver = driver_for(node)
        engine = driver.engine_check() if node.state in CHECK_WAITING_STATES else None
        if engine is not None:
            problems = [] if engine.available else [f"{NOT_AVAILABLE}{engine.text}"]
            return _record(node, dict(ok=engine.available, expected_gpu_count=expected,
                                      problems=problems, raw=engine.text[:20000]))
        report = driver.health()
    except DriverError as exc:
        _tell_operators_if_new(node, [f"{UNREACHABLE}{unreachable_diagnosis(node, exc.message)}"])
        return _record(node, dict(ok=False, expected_gpu_count=expected, problems=[UNREACHABLE_TEXT],
                                  raw=f"{DRIVER_ERROR}{exc.message}"[:20000]))
    if is_test_host(node):  # no GPUs by declaration: reachable is healthy
        return _record(node, dict(ok=True, gpu_count=report.gpu_count, expected_gpu_count=expected,
                                  problems=[], raw=f"{TEST_HOST_NOTE}\n{report.raw}"[:20000]))
    problems = health_problems(report, expected_gpus=expected)
    if problems:
        _tell_operators_if_new(node, problems)
    return _record(node, dict(
        ok=not problems, gpu_count=report.gpu_count, expected_gpu_count=expected,
        max_temperature_c=report.max_temperature_c, ecc_errors=report.ecc_errors,
        problems=problems, raw=report.raw[:20000]))


def _record(node: Node, fields: dict) -> HealthCheck:
    """Stores the check and, in the same transaction, the node's latest health on its row (what
    the inventory shows): a write that reads none of the node's earlier checks."""
    with transaction.atomic():
        was_ok = Node.objects.select_for_update().values_list("health_ok", flat=True).get(pk=node.pk)
        check = HealthCheck.objects.create(node=node, **fields)
        Node.objects.filter(pk=node.pk).update(
            health_ok=check.ok, health_checked_at=check.at,
            health_failures=0 if check.ok else F("health_failures") + 1)
        health_degraded_publish(node=node, check=check, was_ok=was_ok)
    return check


# The move a passing check makes: an enrolled node into stock, one in maintenance back to it.
INTO_STOCK = {NodeState.ENROLLED: "accept", NodeState.MAINTENANCE: "return_to_service"}
CHECK_WAITING_STATES = frozenset(INTO_STOCK)


def node_accept_if_healthy(*, node: Node, by) -> HealthCheck:
    """An enrolled node enters stock (ready), and one in maintenance returns to it, only when its
    driver reaches it and its health check passes; otherwise it stays where it is with the
    check's problems on its page (I/O: call from a task). A declared test host (driver option
    ``test_host``) has no GPUs to check: it passes once reachable, and the event says the GPU
    checks were skipped. Entering stock records the node's clean baseline (what the hand-back's
    attestation compares with); a node whose baseline cannot be listed stays out of stock."""
    check = node_health_check(node=node)
    node.refresh_from_db()
    move = INTO_STOCK.get(node.state)
    if move is None or not check.ok:
        return check  # accepted, or taken elsewhere, meanwhile; or not healthy
    driver = driver_for(node)
    try:
        engine = driver.engine_check()
    except DriverError:
        return check  # the engine answered the check a moment ago: the next check decides
    if engine is not None:  # erased by its engine at each hand-back: no baseline to record
        node_transition(node=node, name=move, by=by, note=f"available in its imaging engine: {engine.text}")
        return check
    try:
        entries = baseline_record(node=node, driver=driver)
    except DriverError as exc:
        NodeEvent.objects.create(node=node, actor=by if getattr(by, "pk", None) else None,
                                 transition="baseline", from_state=node.state,
                                 to_state=node.state,
                                 note=f"not accepted: its clean baseline could not be recorded: "
                                      f"{exc.message}")
        return check
    how = ("reachable; GPU checks skipped on a declared test host" if is_test_host(node)
           else "reachability and health check passed")
    if not driver.simulated:
        how += f"; clean baseline recorded ({len(entries)} entries)"
    node_transition(node=node, name=move, by=by, note=how)
    return check


def operator_problems(node: Node, check: HealthCheck) -> list[str]:
    """A check's problems as the node page shows them to staff: an unreachable node with the
    address, port and the driver's error instead of the customer's sentence."""
    problems = []
    for problem in check.problems or []:
        if problem == UNREACHABLE_TEXT and check.raw.startswith(DRIVER_ERROR):
            problem = unreachable_diagnosis(node, check.raw[len(DRIVER_ERROR):].strip())
        problems.append(problem)
    return problems


def _tell_operators_if_new(node: Node, problems: list[str]) -> None:
    """Operators hear when a node turns unhealthy, once (not at every periodic check while it
    stays so): a node in service, and one whose check into stock (enrolment, return from
    maintenance) failed, which runs in the background after the operator asked."""
    if node.health_ok is not False:  # the latest check (kept on the row) passed, or none yet
        node_unhealthy_notify_staff(node, problems)


def node_unhealthy_notify_staff(node: Node, problems: list[str]) -> None:
    """The operators' e-mail: this node failed its health check, with what failed and its page."""
    staff_notify_later(role=OPERATORS, subject=f"Node {node.hostname} failed its health check",
                       lines=[f"Node {node.hostname} ({node.sku.name}, {node.get_state_display()}) "
                              f"failed its health check:", *[f"- {p}" for p in problems]],
                       path=f"/ops/nodes/{node.pk}/")
