"""Fault experiment: a batch of orders on 2 real workers while, at random moments, the lease
thread's database connection is cut or every worker backend is terminated (a failover).

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/trainyard REDIS_URL=redis://127.0.0.1:6379/0 \\
        .venv/bin/python bench/pipeline_faults.py

Uses its own database (``trainyard_faults``, dropped at the end) and queue, the simulated driver
with real delays (deploy 3 s, scripts 0.5 s) and a 3 s lease, and runs the sweeper here once a
second (beat's job). Prints, per fault, how often it was injected, then: orders lost (not active
at the end), steps doubled (an operation completed twice on a node, by its journal),
overlapping executions (two executions' operations open on one node at once, by the journal) and
stuck runs. Exits non-zero unless all four are zero. Env: FAULT_ORDERS (12), FAULT_WINDOW_S (40),
FAULT_TIMEOUT_S (300), FAULT_SEED (random), BENCH_DB (trainyard_faults).
"""

from __future__ import annotations

import os
import random
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench.pipeline_bench import (  # noqa: E402
    _database_urls,
    _psql,
    _seed,
    _start_workers,
    _tear_down,
    _wait_for_workers,
)

LEASE_UPDATE = "UPDATE \"provisioning_steprun\" SET \"lease_expires_at\"%"


def _terminate(where: str, params=()) -> int:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = "
                       f"current_database() AND pid <> pg_backend_pid() AND {where}", params)
        return len(cursor.fetchall())


FAULTS = {
    "lease connection cut": lambda: _terminate("query LIKE %s", [LEASE_UPDATE]),
    "all worker backends terminated": lambda: _terminate("backend_type = 'client backend'"),
}


def main() -> int:
    n = int(os.environ.get("FAULT_ORDERS", "12"))
    window = float(os.environ.get("FAULT_WINDOW_S", "40"))
    timeout = float(os.environ.get("FAULT_TIMEOUT_S", "300"))
    seed = int(os.environ.get("FAULT_SEED", str(random.randrange(10**6))))
    rng = random.Random(seed)
    os.environ.setdefault("BENCH_DB", "trainyard_faults")
    bench_url, admin_url, db_name = _database_urls()
    queue = f"faults-{uuid.uuid4().hex[:8]}"
    work = Path(tempfile.mkdtemp(prefix="pipeline-faults-"))
    _psql(admin_url, f'DROP DATABASE IF EXISTS "{db_name}" WITH (FORCE)')
    _psql(admin_url, f'CREATE DATABASE "{db_name}"')
    os.environ.update({
        "DATABASE_URL": bench_url, "CELERY_QUEUE": queue, "DJANGO_SETTINGS_MODULE": "portal.settings",
        "SIMULATED_DRIVER_STATE_DIR": str(work / "nodes"), "PROVISIONING_STEP_LEASE_S": "3",
        "PROVISIONING_RETRY_BASE_MS": "300", "CELERY_VISIBILITY_TIMEOUT": "30",
        "EMAIL_BACKEND": "django.core.mail.backends.locmem.EmailBackend", "LOG_LEVEL": "WARNING",
    })
    procs: list[subprocess.Popen] = []
    try:
        import django

        django.setup()
        from django.core.management import call_command
        from django.db import connection

        from portal.celery import app
        from portal.orders.models import Order
        from provisioning.drivers.simulated import journal_completed, journal_overlaps, read_journal
        from provisioning.fulfilment.approvals import order_approve
        from provisioning.models import Node, ProvisioningRun, StepRun
        from provisioning.states import RUN_OPEN
        from provisioning.tasks import sweep_task

        call_command("migrate", verbosity=0)
        approver, orders = _seed(n)
        Node.objects.update(driver_options={"delay_scale": 1, "delays": {
            "deploy_os": 3, "run": 0.5, "power": 0.2, "health": 0}})
        procs = _start_workers(os.environ.copy(), queue, work)
        _wait_for_workers(app, queue, procs, work)
        for order in orders:
            order_approve(order=order, by=approver)
        injected = dict.fromkeys(FAULTS, 0)
        started = time.monotonic()
        next_fault = started + rng.uniform(0.5, 2.5)
        ids = [o.pk for o in orders]
        while time.monotonic() - started < timeout:
            now = time.monotonic()
            if now - started < window and now >= next_fault:
                name = rng.choice(list(FAULTS))
                try:
                    injected[name] += FAULTS[name]() > 0
                except Exception:  # our own connection may be the one to go
                    connection.close()
                next_fault = now + rng.uniform(0.5, 2.5)
            try:
                sweep_task()
                settled = not Order.objects.filter(pk__in=ids).exclude(
                    state__in=["active", "provision_failed"]).exists()
            except Exception:
                connection.close()
                settled = False
            if settled and now - started >= window:
                break
            time.sleep(1.0)
        elapsed = time.monotonic() - started
        states = list(Order.objects.filter(pk__in=ids).values_list("state", flat=True))
        lost = sum(1 for s in states if s != "active")
        doubled = overlapping = operations = 0
        for node in Node.objects.all():
            journal = read_journal(node.hostname)
            operations += sum(1 for e in journal if e["event"] == "start")
            doubled += sum(c - 1 for name, c in journal_completed(journal).items() if c > 1
                           and name != "power_on")  # power on is part of deploy, may repeat
            overlapping += len(journal_overlaps(journal))
        stuck = ProvisioningRun.objects.filter(order_id__in=ids, status__in=list(RUN_OPEN)).count()
        executions = sum(StepRun.objects.filter(run__order_id__in=ids).values_list("executions", flat=True))
        steps = StepRun.objects.filter(run__order_id__in=ids).count()
        print()
        print(f"{n} orders · 2 workers · simulated nodes (deploy 3 s, scripts 0.5 s) · lease 3 s · "
              f"faults for {window:.0f} s · seed {seed} · settled in {elapsed:.0f} s")
        print()
        print(f"{'fault':40}{'injected':>10}")
        for name, count in injected.items():
            print(f"{name:40}{count:10d}")
        print()
        print(f"{'result':40}{'count':>10}")
        for label, value in (("orders active", n - lost), ("orders lost", lost),
                             ("steps doubled (journal)", doubled),
                             ("overlapping executions (journal)", overlapping),
                             ("stuck runs", stuck),
                             ("node operations journaled", operations),
                             ("step executions / steps", f"{executions}/{steps}")):
            print(f"{label:40}{value!s:>10}")
        return 1 if lost or doubled or overlapping or stuck else 0
    finally:
        _tear_down(procs, admin_url, db_name)


if __name__ == "__main__":
    sys.exit(main())
