"""Reports whether the database, the broker and a worker answer."""

from django.db import connection

from portal.celery import app


def database_status() -> str:
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
        return "ok"
    except Exception as exc:  # noqa: BLE001 - any failure means unhealthy
        return f"error: {exc.__class__.__name__}"


def broker_status() -> str:
    try:
        with app.connection_for_write() as conn:
            conn.ensure_connection(max_retries=1, timeout=2)
        return "ok"
    except Exception as exc:  # noqa: BLE001
        return f"error: {exc.__class__.__name__}"


def worker_status(timeout_seconds: float = 1.0) -> str:
    try:
        replies = app.control.ping(timeout=timeout_seconds)
    except Exception as exc:  # noqa: BLE001
        return f"error: {exc.__class__.__name__}"
    return f"ok ({len(replies)})" if replies else "no worker answered"


def health_report() -> dict:
    report = {"database": database_status(), "broker": broker_status(), "worker": worker_status()}
    report["status"] = "ok" if all(v.startswith("ok") for v in report.values()) else "degraded"
    return report
