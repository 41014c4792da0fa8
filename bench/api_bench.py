"""Reseller API throughput: requests/s of the busiest calls against a trivial DRF endpoint, in the
same run, on the same gunicorn workers, over loopback.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/trainyard REDIS_URL=redis://127.0.0.1:6379/0 \
        .venv/bin/python bench/api_bench.py

Creates a fresh database (``trainyard_api_bench`` on the server of DATABASE_URL, dropped at the
end; without PostgreSQL a SQLite file in a temporary directory), migrates it, seeds the catalog
and gives a reseller a key, a quote and BENCH_ORDERS orders. Starts gunicorn (BENCH_WORKERS=2 sync
workers, DEBUG off) with the portal's settings and one extra endpoint, GET /api/v1/bench-trivial,
which does nothing but what every API request does (the API key's authentication, permissions,
throttle, rendering). Then the load: with wrk on the PATH (Debian's package `wrk`; BENCH_CLIENT=wrk
or auto), wrk with BENCH_CLIENTS connections on 2 threads (1 for one connection), as the issue
measured (a C client, so the 2 cores go to the server); otherwise (BENCH_CLIENT=python)
BENCH_CLIENTS Python load processes (http.client), whose own CPU shares the cores and pulls every
ratio towards 1. Each endpoint is called for BENCH_SECONDS, in BENCH_ROUNDS rounds; in each round
every endpoint is measured right after a measurement of the trivial endpoint, and its ratio is
taken to that one (a shared machine changes speed from one minute to the next: ratios of
measurements far apart in time mislead).
The table shows the median requests/s, the median ratio with its range over the rounds, and the
target: ≥ 0.5× for every call (issue 26: plain ORM reads at no less than half the trivial
endpoint's rate).

Every answer must be a 200 (wrk: no non-2xx answer, and one request per endpoint checked from
Python first); any other answer stops the bench (exit 1).
Tests never assert on speed: this prints numbers for people.
"""

from __future__ import annotations

import http.client
import json
import multiprocessing
import os
import re
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from urllib.parse import urlparse, urlunparse

REPO = Path(__file__).resolve().parent.parent
WORKERS = int(os.environ.get("BENCH_WORKERS", "2"))
CLIENTS = int(os.environ.get("BENCH_CLIENTS", "4"))
SECONDS = float(os.environ.get("BENCH_SECONDS", "2"))
ROUNDS = int(os.environ.get("BENCH_ROUNDS", "5"))
ORDERS = int(os.environ.get("BENCH_ORDERS", "10"))
CLIENT = os.environ.get("BENCH_CLIENT", "auto")
WRK = shutil.which("wrk") if CLIENT in ("auto", "wrk") else None
WRK_THREADS = min(2, CLIENTS)
WARM_SECONDS = 1.0
ESTIMATE = {"model": "llama-3.1-8b", "sku": "8x-h100-sxm-80gb",
            "parallel": {"dp": 8, "sharding": "zero3"}, "training": {"seq_len": 4096}}


def _fail(message: str) -> None:
    print(f"api_bench: {message}", file=sys.stderr)
    sys.exit(1)


# --- a fresh database ---------------------------------------------------------------------------
def _database(tmp: Path) -> tuple[str, Callable[[], None]]:
    """(DATABASE_URL of a fresh database, a function that drops it)."""
    raw = os.environ.get("DATABASE_URL", "")
    url = urlparse(raw)
    if url.scheme not in ("postgres", "postgresql", "pgsql"):
        return f"sqlite:///{tmp / 'bench.sqlite3'}", lambda: None
    import psycopg

    name = os.environ.get("BENCH_DB", "trainyard_api_bench")
    admin = urlunparse(url._replace(path="/postgres"))

    def sql(statement: str) -> None:
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(statement)

    sql(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    sql(f'CREATE DATABASE "{name}"')
    drop = f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'
    return urlunparse(url._replace(path=f"/{name}")), lambda: sql(drop)


def _prepare(env: dict) -> dict:
    """Migrates and fills the fresh database (in a child process, so this one stays Django-free);
    returns the key, the quote reference."""
    subprocess.run([sys.executable, "manage.py", "migrate", "--noinput", "-v", "0"], cwd=REPO, env=env,
                   check=True)
    script = f"""
import json, django
django.setup()
from portal.accounts.models import Organisation
from portal.accounts.services import api_key_issue
from portal.catalog.services import catalog_seed
from tests.factories import make_order, make_quote
catalog_seed()
reseller = Organisation.objects.create(name="Bench Resale", slug="bench-resale", kind="reseller")
customer = Organisation.objects.create(name="Bench Client", slug="bench-client", parent=reseller)
quote = make_quote(customer)
for _ in range({ORDERS}):
    make_order(customer)
print(json.dumps({{"key": api_key_issue(organisation=reseller, name="bench").plaintext,
                  "quote": quote.reference}}))
"""
    done = subprocess.run([sys.executable, "-c", script], cwd=REPO, capture_output=True, text=True,
                          env=env | {"DJANGO_SETTINGS_MODULE": "portal.settings"})
    if done.returncode:
        _fail(f"setting up the database failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


# --- gunicorn -------------------------------------------------------------------------------------
def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _start_gunicorn(env: dict, port: int, log: Path) -> subprocess.Popen:
    proc = subprocess.Popen(
        [sys.executable, "-m", "gunicorn", "portal.wsgi:application", "--workers", str(WORKERS),
         "--bind", f"127.0.0.1:{port}", "--worker-class", "sync", "--log-level", "warning"],
        cwd=REPO, env=env | {"DJANGO_SETTINGS_MODULE": "bench.api_bench_site.settings"},
        stdout=log.open("w"), stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            _fail(f"gunicorn exited:\n{log.read_text()[-3000:]}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return proc
        except OSError:
            time.sleep(0.2)
    proc.terminate()
    _fail("gunicorn did not listen within 60 s")


# --- load -----------------------------------------------------------------------------------------
def _client(args) -> tuple[int, str]:
    """One load process: as many requests as it can until ``stop_at``; (count, first error)."""
    port, method, path, body, key, start_at, stop_at = args
    headers = {"Authorization": f"Api-Key {key}", "Accept": "application/json"}
    payload = json.dumps(body).encode() if body is not None else None
    if payload is not None:
        headers["Content-Type"] = "application/json"
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    while time.time() < start_at:
        time.sleep(0.001)
    done = 0
    while time.time() < stop_at:
        try:
            conn.request(method, path, body=payload, headers=headers)
            response = conn.getresponse()
            data = response.read()
        except (OSError, http.client.HTTPException):  # a sync worker closes after each answer
            conn.close()
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
            continue
        if response.status != 200:
            return done, f"{method} {path}: HTTP {response.status} {data[:300]!r}"
        if response.getheader("Connection", "").lower() == "close":
            conn.close()
        done += 1
    return done, ""


def _wrk(port: int, key: str, method: str, path: str, body, tmp: Path) -> float:
    """Requests/s of wrk over SECONDS; any non-2xx answer stops the bench."""
    script = tmp / "request.lua"
    lines = [f'wrk.method = "{method}"', f'wrk.headers["Authorization"] = "Api-Key {key}"',
             'wrk.headers["Accept"] = "application/json"']
    if body is not None:
        # the body's JSON is printable ASCII, so its JSON string literal (only \" and \\ escapes)
        # is a Lua string literal
        lines += ['wrk.headers["Content-Type"] = "application/json"',
                  f"wrk.body = {json.dumps(json.dumps(body))}"]
    script.write_text("\n".join(lines) + "\n")
    command = [WRK, f"-t{WRK_THREADS}", f"-c{CLIENTS}", f"-d{max(1, round(SECONDS))}s", "-s", str(script),
               f"http://127.0.0.1:{port}{path}"]  # wrk takes whole seconds
    done = subprocess.run(command, capture_output=True, text=True)
    # wrk counts answers of 400 and over as "Non-2xx or 3xx"; connect, read, write and timeout
    # errors as "Socket errors"
    bad = re.search(r"Non-2xx or 3xx responses|Socket errors", done.stdout)
    rate = re.search(r"Requests/sec:\s+([\d.]+)", done.stdout)
    if done.returncode or bad or not rate:
        _fail(f"wrk {method} {path}: {done.stdout[-1500:]}{done.stderr[-500:]}")
    return float(rate.group(1))


def _measure(pool, port: int, key: str, method: str, path: str, body, tmp: Path) -> float:
    if WRK:
        return _wrk(port, key, method, path, body, tmp)
    start_at = time.time() + 0.3
    stop_at = start_at + SECONDS
    results = pool.map(_client, [(port, method, path, body, key, start_at, stop_at)] * CLIENTS)
    errors = [error for _, error in results if error]
    if errors:
        _fail(errors[0])
    return sum(count for count, _ in results) / SECONDS


def main() -> None:
    if CLIENT == "wrk" and not WRK:
        _fail("BENCH_CLIENT=wrk but wrk is not on the PATH (Debian: apt-get install wrk)")
    if CLIENT not in ("auto", "wrk", "python"):
        _fail(f"BENCH_CLIENT={CLIENT!r}: use auto, wrk or python")
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        database_url, drop = _database(tmp)
        env = os.environ | {"DATABASE_URL": database_url, "DEBUG": "false",
                            "API_RATE_LIMIT": "100000000/min", "TRAINYARD_VAR_DIR": str(tmp / "var"),
                            "PYTHONPATH": str(REPO)}
        gunicorn = None
        try:
            fixtures = _prepare(env)
            port = _free_port()
            gunicorn = _start_gunicorn(env, port, tmp / "gunicorn.log")
            endpoints = [
                ("trivial DRF endpoint", "GET", "/api/v1/bench-trivial", None, None),
                ("GET /api/v1/catalog", "GET", "/api/v1/catalog", None, 0.5),
                ("GET /api/v1/quotes/<ref>", "GET", f"/api/v1/quotes/{fixtures['quote']}", None, 0.5),
                (f"GET /api/v1/orders ({ORDERS} orders)", "GET", "/api/v1/orders", None, 0.5),
                ("POST /api/v1/estimates", "POST", "/api/v1/estimates", ESTIMATE, 0.5),
            ]
            rates: dict[str, list[float]] = {name: [] for name, *_ in endpoints}
            ratios: dict[str, list[float]] = {name: [] for name, *_ in endpoints[1:]}
            trivial = endpoints[0]
            with multiprocessing.Pool(CLIENTS) as pool:
                for _, method, path, body, _ in endpoints:  # warm every worker's caches (and check)
                    start = time.time() + 0.2
                    pool.map(_client, [(port, method, path, body, fixtures["key"], start,
                                        start + WARM_SECONDS)] * CLIENTS)
                for _ in range(ROUNDS):
                    for name, method, path, body, _ in endpoints[1:]:
                        base = _measure(pool, port, fixtures["key"], *trivial[1:4], tmp)
                        rate = _measure(pool, port, fixtures["key"], method, path, body, tmp)
                        rates[trivial[0]].append(base)
                        rates[name].append(rate)
                        ratios[name].append(rate / base)
        finally:
            if gunicorn is not None:
                gunicorn.terminate()
                gunicorn.wait(timeout=30)
            drop()
    _print_table(endpoints, rates, ratios)


def _print_table(endpoints, rates, ratios) -> None:
    clients = (f"wrk ({CLIENTS} connections, {WRK_THREADS} threads)" if WRK
               else f"{CLIENTS} Python client processes")
    print(f"\nReseller API on gunicorn ({WORKERS} sync workers), loopback, {clients}, "
          f"{ROUNDS} rounds × {SECONDS:g} s per endpoint, each after {SECONDS:g} s of the trivial endpoint"
          f" (medians; load average {' '.join(f'{x:.2f}' for x in os.getloadavg())})\n")
    print(f"{'endpoint':34} {'req/s':>8} {'× trivial':>10} {'range':>12} {'target':>8}  ")
    print("-" * 80)
    for name, _, _, _, target in endpoints:
        rate = statistics.median(rates[name])
        if target is None:
            print(f"{name:34} {rate:8.0f} {1:9.2f}×")
            continue
        ratio = statistics.median(ratios[name])
        spread = f"{min(ratios[name]):.2f}–{max(ratios[name]):.2f}"
        verdict = "ok" if ratio >= target else "BELOW"
        print(f"{name:34} {rate:8.0f} {ratio:9.2f}× {spread:>12} {f'≥ {target:.1f}×':>8}  {verdict}")
    print("\nratios by round: " + "; ".join(f"{name}: {', '.join(f'{r:.2f}' for r in ratios[name])}"
                                           for name in ratios))


if __name__ == "__main__":
    main()
