"""Retention at scale: how long the beat tasks take on a filled database, how long each batch's
DELETE runs (the time its rows stay locked), and what a second run, with nothing left to delete,
costs (what every hourly run costs once the backlog is gone).

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/trainyard .venv/bin/python bench/retention_bench.py

Creates a fresh database (BENCH_DB, default ``trainyard_retention_bench``, dropped at the end) on
the server of DATABASE_URL, migrates it and fills it with SQL (generate_series): BENCH_NODES nodes
(300) with one health check every BENCH_CHECK_MINUTES (15) for BENCH_DAYS days (45), and
BENCH_RUNS finished runs (2,000) of 8 steps with 20 log lines each, half of them finished before
the step-log window. Then runs the health-check and step-log tasks' services twice with the
default windows and batch size. Tests never assert on speed: this prints numbers for people.
"""

from __future__ import annotations

import os
import statistics
import sys
import time
from pathlib import Path
from urllib.parse import urlparse, urlunparse

REPO = Path(__file__).resolve().parent.parent


def _fail(message: str) -> None:
    print(f"retention_bench: {message}", file=sys.stderr)
    sys.exit(2)


def _psql(admin_url: str, statement: str) -> None:
    import psycopg

    with psycopg.connect(admin_url, autocommit=True) as conn:
        conn.execute(statement)


def _fill(*, nodes: int, days: int, every_min: int, runs: int) -> None:
    from django.db import connection
    from django.utils import timezone

    from portal.catalog.models import ServerSKU
    from portal.orders.states import OrderState
    from tests.factories import OrganisationFactory, make_order

    sku = ServerSKU.objects.get(slug="8x-h100-sxm-80gb")
    order = make_order(OrganisationFactory(), state=OrderState.ACTIVE)
    now = timezone.now()
    with connection.cursor() as cur:
        cur.execute("""
            INSERT INTO provisioning_node (hostname, sku_id, management_address, driver, driver_options,
                fabric_group, fabric_address, nvme_devices, wipe_method, baseline, notes, state,
                state_changed_at, fence, created_at)
            SELECT 'bench-' || n, %s, '10.9.0.' || n, 'simulated', '{}', '', '', '[]', 'files', '[]',
                   '', 'active', %s, 0, %s FROM generate_series(1, %s) n""", [sku.pk, now, now, nodes])
        cur.execute("""
            INSERT INTO provisioning_healthcheck (node_id, at, ok, gpu_count, expected_gpu_count,
                max_temperature_c, ecc_errors, problems, raw)
            SELECT node.id, %s - make_interval(mins => m), (m %% 97) <> 0, 8, 8, 60 + (m %% 25), 0,
                   '[]', 'bench'
            FROM provisioning_node node,
                 generate_series(0, %s * 24 * 60 - 1, %s) m""", [now, days, every_min])
        cur.execute("""
            INSERT INTO provisioning_provisioningrun (order_id, kind, status, created_at,
                started_at, finished_at, error, queue_error)
            SELECT %s, 'reboot', 'succeeded', %s, %s, %s - make_interval(days => r %% 180), '', ''
            FROM generate_series(1, %s) r""", [order.pk, now, now, now, runs])
        cur.execute("""
            INSERT INTO provisioning_steprun (run_id, node_id, step, position, status, attempts,
                executions, fence, stop_requested, error, result, claimed_by)
            SELECT run.id, (SELECT min(id) FROM provisioning_node), 'step' || s, s, 'succeeded', 1, 1,
                   0, false, '', '{}', ''
            FROM provisioning_provisioningrun run, generate_series(1, 8) s""")
        cur.execute("""
            INSERT INTO provisioning_steplogline (step_run_id, at, attempt, text, staff_only)
            SELECT sr.id, %s, 1, 'bench log line ' || l || ' of a step that did its work', false
            FROM provisioning_steprun sr, generate_series(1, 20) l""", [now])
        cur.execute("ANALYZE")


class _DeleteTimer:
    """Times each DELETE statement (the rows it deletes stay locked until its batch commits)."""

    def __init__(self):
        self.ms: list[float] = []

    def __call__(self, execute, sql, params, many, context):
        if not sql.lstrip().upper().startswith("DELETE"):
            return execute(sql, params, many, context)
        start = time.perf_counter()
        try:
            return execute(sql, params, many, context)
        finally:
            self.ms.append((time.perf_counter() - start) * 1000)


def _timed(label: str, work) -> tuple:
    from django.db import connection

    timer = _DeleteTimer()
    start = time.perf_counter()
    with connection.execute_wrapper(timer):
        result = work()
    return label, result, time.perf_counter() - start, timer.ms


def _row(label, result, seconds, delete_ms) -> str:
    deleted = sum((result.get("deleted", result) if isinstance(result, dict) else result).values())
    summarised = result.get("summarised", "") if isinstance(result, dict) else ""
    p95 = statistics.quantiles(delete_ms, n=20)[-1] if len(delete_ms) >= 2 else (delete_ms or [0])[0]
    longest = max(delete_ms, default=0.0)
    return (f"| {label} | {summarised} | {deleted:,} | {len(delete_ms)} | {seconds:.2f} | "
            f"{p95:.0f} | {longest:.0f} |")


def main() -> int:
    raw = os.environ.get("DATABASE_URL", "")
    url = urlparse(raw)
    if url.scheme not in ("postgres", "postgresql", "pgsql"):
        _fail("needs PostgreSQL: set DATABASE_URL=postgres://postgres@127.0.0.1:5432/trainyard")
    name = os.environ.get("BENCH_DB", "trainyard_retention_bench")
    admin = urlunparse(url._replace(path="/postgres"))
    nodes, days = int(os.environ.get("BENCH_NODES", "300")), int(os.environ.get("BENCH_DAYS", "45"))
    every_min = int(os.environ.get("BENCH_CHECK_MINUTES", "15"))
    runs = int(os.environ.get("BENCH_RUNS", "2000"))
    _psql(admin, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    _psql(admin, f'CREATE DATABASE "{name}"')
    os.environ.update({"DATABASE_URL": urlunparse(url._replace(path=f"/{name}")),
                       "DJANGO_SETTINGS_MODULE": "portal.settings", "LOG_LEVEL": "WARNING"})
    sys.path.insert(0, str(REPO))
    try:
        import django

        django.setup()
        from django.conf import settings
        from django.core.management import call_command
        from django.utils import timezone

        from portal.catalog.services import catalog_seed
        from provisioning.models import HealthCheck, StepLogLine
        from provisioning.retention import health_retention, step_logs_prune

        call_command("migrate", verbosity=0)
        catalog_seed()
        start = time.perf_counter()
        _fill(nodes=nodes, days=days, every_min=every_min, runs=runs)
        checks, lines = HealthCheck.objects.count(), StepLogLine.objects.count()
        print(f"filled {checks:,} health checks ({nodes} nodes × {days} days, one per {every_min} min) "
              f"and {lines:,} step log lines ({runs:,} runs) in {time.perf_counter() - start:.1f}s")
        print(f"windows: health checks {settings.HEALTH_CHECK_RETENTION_DAYS} days, step logs "
              f"{settings.STEP_LOG_RETENTION_DAYS} days; batch {settings.RETENTION_BATCH_SIZE:,} rows\n")
        print("| task | days × nodes summarised | rows deleted | DELETE batches | total s "
              "| p95 DELETE ms | longest DELETE ms |")
        print("| --- | --- | --- | --- | --- | --- | --- |")
        for run in ("first run", "second run"):
            now = timezone.now()
            print(_row(*_timed(f"health checks, {run}", lambda n=now: health_retention(now=n))))
            print(_row(*_timed(f"step logs, {run}", lambda n=now: dict(step_logs_prune(now=n)))))
        print(f"\nleft: {HealthCheck.objects.count():,} health checks, "
              f"{StepLogLine.objects.count():,} step log lines")
        return 0
    finally:
        from django.db import connections

        connections.close_all()
        _psql(admin, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


if __name__ == "__main__":
    sys.exit(main())
