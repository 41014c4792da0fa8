"""GPU health: the limits (one place) and the periodic check of a node (I/O: call from a task)."""

from __future__ import annotations

from django.db import transaction

from portal.orders.staff_notifications import node_unhealthy_notify_staff
from provisioning.drivers import DriverError, HealthReport, driver_for
from provisioning.models import HealthCheck, Node
from provisioning.states import NodeState
from provisioning.transitions import node_transition
from provisioning.webhooks import UNREACHABLE, UNREACHABLE_TEXT, health_degraded_publish

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


def node_health_check(*, node: Node) -> HealthCheck:
    """Asks the node's driver for GPU health and stores what it said (I/O: call from a task)."""
    node = Node.objects.select_related("sku__gpu").get(pk=node.pk)
    expected = node.sku.gpu_count
    try:
        report = driver_for(node).health()
    except DriverError as exc:
        _tell_operators_if_new(node, [f"{UNREACHABLE}{exc.message}"])
        return _record(node, dict(ok=False, expected_gpu_count=expected, problems=[UNREACHABLE_TEXT],
                                  raw=f"driver error: {exc.message}"[:20000]))
    problems = health_problems(report, expected_gpus=expected)
    if problems:
        _tell_operators_if_new(node, problems)
    return _record(node, dict(
        ok=not problems, gpu_count=report.gpu_count, expected_gpu_count=expected,
        max_temperature_c=report.max_temperature_c, ecc_errors=report.ecc_errors,
        problems=problems, raw=report.raw[:20000]))


def _record(node: Node, fields: dict) -> HealthCheck:
    with transaction.atomic():
        check = HealthCheck.objects.create(node=node, **fields)
        health_degraded_publish(node=node, check=check)
    return check


# The move a passing check makes: an enrolled node into stock, one in maintenance back to it.
INTO_STOCK = {NodeState.ENROLLED: "accept", NodeState.MAINTENANCE: "return_to_service"}
CHECK_WAITING_STATES = frozenset(INTO_STOCK)


def node_accept_if_healthy(*, node: Node, by) -> HealthCheck:
    """An enrolled node enters stock (ready), and one in maintenance returns to it, only when its
    driver reaches it and its health check passes; otherwise it stays where it is with the
    check's problems on its page (I/O: call from a task). A declared test host (driver option
    ``test_host``) has no GPUs to check: it passes once reachable, and the event says the GPU
    checks were skipped."""
    check = node_health_check(node=node)
    node.refresh_from_db()
    move = INTO_STOCK.get(node.state)
    if move is None:
        return check  # accepted, or taken elsewhere, meanwhile
    reachable = not any(p.startswith(UNREACHABLE) for p in check.problems)
    if check.ok:
        node_transition(node=node, name=move, by=by, note="reachability and health check passed")
    elif reachable and node.driver_options.get("test_host"):
        node_transition(node=node, name=move, by=by,
                        note="reachable; GPU checks skipped on a declared test host")
    return check


def _tell_operators_if_new(node: Node, problems: list[str]) -> None:
    """Operators hear when a node in service turns unhealthy, once (not at every periodic check
    while it stays so); an enrolled node's failed acceptance check is shown to whoever asked."""
    if node.state in CHECK_WAITING_STATES:  # not in service: whoever asked reads the result
        return
    last = node.health_checks.order_by("-at", "-pk").first()
    if last is None or last.ok:
        node_unhealthy_notify_staff(node, problems)
