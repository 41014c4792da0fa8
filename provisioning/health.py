"""GPU health: the limits (one place) and the periodic check of a node (I/O: call from a task)."""

from __future__ import annotations

from django.db import transaction

from provisioning.drivers import DriverError, HealthReport, driver_for
from provisioning.models import HealthCheck, Node
from provisioning.webhooks import health_degraded_publish

# Above this a GPU is too hot: the periodic health check reports it and acceptance fails it.
MAX_GPU_TEMPERATURE_C = 85.0


def gpu_too_hot(temperature_c: float | None) -> bool:
    return temperature_c is not None and temperature_c > MAX_GPU_TEMPERATURE_C


def health_problems(report: HealthReport, *, expected_gpus: int) -> list[str]:
    """What is wrong with a node according to ``report``, in words an operator reads."""
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
        return _record(node, dict(ok=False, expected_gpu_count=expected,
                                  problems=[f"health check failed: {exc.message}"]))
    problems = health_problems(report, expected_gpus=expected)
    return _record(node, dict(
        ok=not problems, gpu_count=report.gpu_count, expected_gpu_count=expected,
        max_temperature_c=report.max_temperature_c, ecc_errors=report.ecc_errors,
        problems=problems, raw=report.raw[:20000]))


def _record(node: Node, fields: dict) -> HealthCheck:
    with transaction.atomic():
        check = HealthCheck.objects.create(node=node, **fields)
        health_degraded_publish(node=node, check=check)
    return check
