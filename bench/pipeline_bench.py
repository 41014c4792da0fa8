"""Pipeline throughput: N single-node orders through every provisioning step, 2 real workers.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/trainyard REDIS_URL=redis://127.0.0.1:6379/0 \
        .venv/bin/python bench/pipeline_bench.py

Creates its own database (``trainyard_bench`` on the server of DATABASE_URL; dropped at the
end), seeds the catalog and N ready nodes driven by the simulated driver with zero delay, and
starts 2 ``celery worker`` processes (prefork, concurrency 1 each) on a queue of its own.
Then, in one run, side by side:

1. baseline: N bare Celery chains of no-op tasks, as many links as the pipeline has steps;
2. the pipeline: N orders approved through ``order_approve``; each goes reserve → deploy OS →
   configure → storage → stack → acceptance → handover → active.

Prints orders/minute against chains/minute, the pipeline's cost per step (StepRun timings:
time in the step, and the hand-off gap from one step's end to the next one's start), and
checks that no order was lost and none is stuck. Exits non-zero if one is. Env: BENCH_ORDERS
(default 200), BENCH_TIMEOUT_S (default 900), BENCH_DB (default trainyard_bench).
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from urllib.parse import urlparse, urlunparse

from celery import shared_task

REPO = Path(__file__).resolve().parent.parent
WORKERS = 2


@shared_task(name="bench.noop", ignore_result=False)  # the baseline polls results
def noop(*args) -> None:
    """A link of the baseline chain: the cost of Celery alone (imported by the workers, -I)."""
    return None


# --- set-up -----------------------------------------------------------------------------------
def _fail(message: str) -> None:
    print(f"pipeline_bench: {message}", file=sys.stderr)
    sys.exit(2)


def _database_urls() -> tuple[str, str, str]:
    raw = os.environ.get("DATABASE_URL", "")
    url = urlparse(raw)
    if url.scheme not in ("postgres", "postgresql", "pgsql"):
        _fail("needs PostgreSQL: set DATABASE_URL=postgres://postgres@127.0.0.1:5432/trainyard")
    if not os.environ.get("REDIS_URL", "").startswith("redis://"):
        _fail("needs Redis: set REDIS_URL=redis://127.0.0.1:6379/0")
    name = os.environ.get("BENCH_DB", "trainyard_bench")
    bench = urlunparse(url._replace(path=f"/{name}"))
    admin = urlunparse(url._replace(path="/postgres"))
    return bench, admin, name


def _psql(admin_url: str, statement: str) -> None:
    import psycopg

    with psycopg.connect(admin_url, autocommit=True) as conn:
        conn.execute(statement)


def _start_workers(env: dict, queue: str, log_dir: Path) -> list[subprocess.Popen]:
    procs = []
    for i in range(WORKERS):
        log = (log_dir / f"worker{i}.log").open("w")
        procs.append(subprocess.Popen(
            [sys.executable, "-m", "celery", "-A", "portal", "worker", "-l", "WARNING",
             "--pool", "prefork", "--concurrency", "1", "-Q", queue, "-n", f"w{i}-{queue}@%h",
             "--without-mingle", "--without-gossip", "-I", "bench.pipeline_bench"],
            cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT))
    return procs


def _wait_for_workers(app, queue: str, procs, log_dir: Path, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if any(p.poll() is not None for p in procs):
            _fail("a worker exited early:\n" + _tail_logs(log_dir))
        replies = app.control.ping(timeout=0.5)
        names = {name for reply in replies for name in reply if queue in name}
        if len(names) == WORKERS:
            return
    _fail(f"workers did not answer within {timeout:.0f}s:\n" + _tail_logs(log_dir))


def _tear_down(procs, admin_url: str, db_name: str) -> None:
    """Stops the workers and drops the bench database."""
    for proc in procs:
        proc.terminate()
    for proc in procs:
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
    try:
        from django.db import connections

        connections.close_all()
    except Exception:  # django may not be set up when set-up failed early
        pass
    _psql(admin_url, f'DROP DATABASE IF EXISTS "{db_name}" WITH (FORCE)')


def _tail_logs(log_dir: Path) -> str:
    return "\n".join(p.read_text(errors="replace")[-2000:] for p in sorted(log_dir.glob("*.log")))


def _seed(n: int):
    from portal.accounts.models import Membership, Organisation, User
    from portal.catalog.models import NetworkOption, NvmeOption, ServerSKU
    from portal.catalog.services import catalog_seed
    from portal.orders.services import order_place
    from portal.quotes.configuration import Configuration
    from portal.quotes.services import quote_create
    from provisioning.fulfilment.orders import order_submit
    from provisioning.inventory.services import node_enrol

    catalog_seed()
    operator = User.objects.create(username="bench-operator", staff_role="operator", is_staff=True)
    approver = User.objects.create(username="bench-approver", staff_role="approver", is_staff=True)
    sku = ServerSKU.objects.get(slug="8x-h100-sxm-80gb")
    for i in range(n):
        node_enrol(by=operator, sku=sku, hostname=f"bench-h100-{i:03d}",
                   management_address=f"10.9.{i // 250}.{i % 250 + 1}", driver="simulated",
                   driver_options={"delay_scale": 0}, ready=True)
    config = Configuration(sku=sku, nvme=NvmeOption.objects.order_by("size_tb").first(),
                           network=NetworkOption.objects.get(slug="eth-1g"))
    orders = []
    for i in range(n):
        org = Organisation.objects.create(name=f"Bench customer {i}", slug=f"bench-{i}")
        customer = User.objects.create(username=f"bench-customer-{i}")
        Membership.objects.create(user=customer, organisation=org)
        order = order_place(quote=quote_create(organisation=org, by=customer, configuration=config),
                            by=customer)
        order_submit(order=order, by=customer)  # a new customer: waits for staff approval
        orders.append(order)
    return approver, orders


# --- the two measurements ---------------------------------------------------------------------
def _baseline(n: int, links: int, timeout: float) -> float:
    from celery import chain

    started = time.monotonic()
    results = [chain(*(noop.si(i, k) for k in range(links))).apply_async() for i in range(n)]
    deadline = started + timeout
    pending = list(results)
    while pending and time.monotonic() < deadline:
        # Poll the oldest chain only: polling all of them would load Redis and skew the baseline.
        while pending and pending[0].ready():
            pending.pop(0)
        time.sleep(0.05)
    if pending:
        _fail(f"{len(pending)} of {n} no-op chains did not finish within {timeout:.0f}s")
    return time.monotonic() - started


def _pipeline(approver, orders, timeout: float) -> tuple[float, dict]:
    from django.db.models import Count

    from portal.orders.models import Order
    from portal.orders.states import OrderState
    from provisioning.fulfilment.approvals import order_approve

    ids = [o.pk for o in orders]
    started = time.monotonic()
    for order in orders:
        order_approve(order=order, by=approver)  # reserves a node; queues the run on commit
    deadline = started + timeout
    last_change, last_counts = time.monotonic(), None
    while True:
        counts = dict(Order.objects.filter(pk__in=ids).values_list("state").annotate(n=Count("pk")))
        done = counts.get(OrderState.ACTIVE, 0) + counts.get(OrderState.PROVISION_FAILED, 0)
        if done == len(ids):
            break
        if counts != last_counts:
            last_change, last_counts = time.monotonic(), counts
        if time.monotonic() > deadline or time.monotonic() - last_change > 60:
            break  # the report below names what is stuck
        time.sleep(0.1)
    return time.monotonic() - started, counts


def _p95(values: list[float]) -> float:
    if len(values) < 2:
        return values[0] if values else float("nan")
    return statistics.quantiles(values, n=20, method="inclusive")[18]


def _step_table(order_ids) -> list[tuple[str, int, float, float, float, float, float]]:
    from provisioning.models import StepRun
    from provisioning.states import STEPS, RunKind, StepStatus

    rows = list(StepRun.objects.filter(run__order_id__in=order_ids, run__kind=RunKind.PROVISION,
                                       status=StepStatus.SUCCEEDED)
                .values_list("run_id", "node_id", "position", "step", "started_at", "finished_at",
                             "attempts"))
    finished = {(r[0], r[1], r[2]): r[5] for r in rows}
    table = []
    for spec in STEPS[RunKind.PROVISION]:
        in_step = [(r[5] - r[4]).total_seconds() for r in rows if r[3] == spec.name]
        gaps = [(r[4] - finished[(r[0], r[1], r[2] - 1)]).total_seconds() for r in rows
                if r[3] == spec.name and (r[0], r[1], r[2] - 1) in finished]
        retries = sum(r[6] - 1 for r in rows if r[3] == spec.name)
        table.append((spec.name, len(in_step), statistics.fmean(in_step) if in_step else 0.0,
                      _p95(in_step), statistics.fmean(gaps) if gaps else float("nan"), _p95(gaps),
                      retries))
    return table


def _integrity(order_ids) -> tuple[list[str], list[str]]:
    """(lost, stuck): orders with no provisioning run, and orders not active at the end."""
    from portal.orders.models import Order
    from portal.orders.states import OrderState
    from provisioning.models import ProvisioningRun
    from provisioning.states import RunKind

    with_run = set(ProvisioningRun.objects.filter(order_id__in=order_ids, kind=RunKind.PROVISION)
                   .values_list("order_id", flat=True))
    lost, stuck = [], []
    for order in Order.objects.filter(pk__in=order_ids):
        if order.pk not in with_run:
            lost.append(f"{order.reference} ({order.state}, no provisioning run)")
        elif order.state != OrderState.ACTIVE:
            run = ProvisioningRun.objects.filter(order=order, kind=RunKind.PROVISION).first()
            open_steps = list(run.steps.exclude(status="succeeded").values_list("step", "status"))
            stuck.append(f"{order.reference} ({order.state}; run {run.status}; "
                         f"first open step {open_steps[:1]}; {order.failure_reason[:120]})")
    return lost, stuck


# --- main -------------------------------------------------------------------------------------
def main() -> int:
    n = int(os.environ.get("BENCH_ORDERS", "200"))
    timeout = float(os.environ.get("BENCH_TIMEOUT_S", "900"))
    bench_url, admin_url, db_name = _database_urls()
    queue = f"bench-{uuid.uuid4().hex[:8]}"
    work = Path(tempfile.mkdtemp(prefix="pipeline-bench-"))
    _psql(admin_url, f'DROP DATABASE IF EXISTS "{db_name}" WITH (FORCE)')
    _psql(admin_url, f'CREATE DATABASE "{db_name}"')
    os.environ.update({
        "DATABASE_URL": bench_url, "CELERY_QUEUE": queue, "DJANGO_SETTINGS_MODULE": "portal.settings",
        "SIMULATED_DRIVER_DELAY_SCALE": "0", "SIMULATED_DRIVER_STATE_DIR": str(work / "nodes"),
        "EMAIL_BACKEND": "django.core.mail.backends.locmem.EmailBackend", "LOG_LEVEL": "WARNING",
    })
    sys.path.insert(0, str(REPO))
    procs: list[subprocess.Popen] = []
    try:
        import django

        django.setup()
        from django.core.management import call_command

        from portal.celery import app
        from provisioning.states import STEPS, RunKind

        links = len(STEPS[RunKind.PROVISION])
        call_command("migrate", verbosity=0)
        t = time.monotonic()
        approver, orders = _seed(n)
        print(f"seeded catalog, {n} ready nodes and {n} submitted orders in "
              f"{time.monotonic() - t:.1f}s (database {db_name})")
        procs = _start_workers(os.environ.copy(), queue, work)
        _wait_for_workers(app, queue, procs, work)
        _baseline(min(n, 10), links, timeout)  # warm-up: worker pools, connections

        base_s = _baseline(n, links, timeout)
        pipe_s, counts = _pipeline(approver, orders, timeout)
        order_ids = [o.pk for o in orders]
        steps = _step_table(order_ids)
        lost, stuck = _integrity(order_ids)
        _report(n=n, links=links, base_s=base_s, pipe_s=pipe_s, counts=counts, steps=steps,
                lost=lost, stuck=stuck)
        return 1 if lost or stuck else 0
    finally:
        _tear_down(procs, admin_url, db_name)


def _report(*, n, links, base_s, pipe_s, counts, steps, lost, stuck) -> None:
    def rate(seconds: float) -> float:
        return n / seconds * 60 if seconds else float("nan")

    print()
    print(f"{n} single-node orders · {WORKERS} celery worker processes (prefork, concurrency 1) · "
          "simulated driver, zero delay · PostgreSQL + Redis")
    print()
    def per_link_ms(seconds: float) -> float:  # worker time per task: wall × workers / tasks
        return seconds * WORKERS / (n * links) * 1000

    print(f"{'':36}{'wall s':>9}{'per minute':>12}{'worker ms per link':>20}")
    print(f"{f'no-op Celery chains ({links} links)':36}{base_s:9.1f}{rate(base_s):12.0f}"
          f"{per_link_ms(base_s):20.1f}")
    print(f"{f'pipeline orders ({links} steps)':36}{pipe_s:9.1f}{rate(pipe_s):12.0f}"
          f"{per_link_ms(pipe_s):20.1f}")
    print(f"{'pipeline / baseline':36}{pipe_s / base_s:8.1f}×")
    print(f"{'pipeline overhead per step':36}{'':21}"
          f"{per_link_ms(pipe_s) - per_link_ms(base_s):20.1f}")
    print()
    print("per step (StepRun timings, seconds): in step = started → finished; hand-off = "
          "previous step finished → this one started (mostly waiting in the queue behind the "
          "other orders' steps)")
    print(f"{'step':14}{'runs':>6}{'in step mean':>14}{'p95':>8}{'hand-off mean':>15}{'p95':>8}"
          f"{'retries':>9}")
    for name, runs, mean, p95, gap_mean, gap_p95, retries in steps:
        gap = f"{gap_mean:15.3f}{gap_p95:8.3f}" if gap_mean == gap_mean else f"{'—':>15}{'—':>8}"
        print(f"{name:14}{runs:6d}{mean:14.3f}{p95:8.3f}{gap}{retries:9d}")
    print()
    states = ", ".join(f"{k} {v}" for k, v in sorted(counts.items()))
    print(f"orders: {n} approved → {states}; lost {len(lost)}, stuck {len(stuck)}")
    for line in (lost + stuck)[:10]:
        print(f"  {line}")
    print("OK: no order lost, none stuck" if not (lost or stuck) else "FAILED: see above")


if __name__ == "__main__":
    sys.exit(main())
