"""Years of data: every main page and API read at SMALL and LARGE, side by side.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/trainyard .venv/bin/python bench/scale_bench.py
    … --scale 0.1          # LARGE at a tenth (5,000 orders, 200k health checks): a quick run
    … --large-orders 5000  # the same, by the number of orders
    … --rounds 3 --repeats 5  # (the default) 15 requests per page and size, in 3 rounds

For each size it creates a database on the server of DATABASE_URL (``trainyard_scale_small``,
``trainyard_scale_large``), migrates it, seeds the catalog, adds the people who look (alice, a
customer; rita, a reseller admin with customers; sam, an approver; olga, an operator; the
reseller's API key) and fills it in bulk (``bench/scale_fill.py``). Then, in alternating rounds
(SMALL, LARGE, SMALL, …: a shared machine's speed drifts, and measuring one size minutes after
the other would put the drift into the ratio), it requests each page and API read ``--repeats``
times with Django's test client (after one warm-up request), counting the queries of each
(CaptureQueriesContext). Each step runs in its own process; both databases are dropped at the
end, also when a run fails.

The table shows, per page: queries, p50 and p95 in ms, and the response size, at both sizes,
with the ratio LARGE/SMALL of p95; then whether LARGE meets the targets of issue 27 (≤ 20
queries, p95 within 2× of SMALL, ≤ 200 KB). Tests never assert on time: this prints numbers.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import urlparse, urlunparse

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

MAX_QUERIES = 20
MAX_RATIO = 2.0
MAX_BYTES = 200 * 1024


def _database_url(name: str) -> str:
    url = urlparse(os.environ["DATABASE_URL"])
    return urlunparse(url._replace(path=f"/{name}"))


def _admin(sql: str) -> None:
    import psycopg

    with psycopg.connect(_database_url("postgres"), autocommit=True) as conn:
        conn.execute(sql)


# --- one size, in its own process --------------------------------------------------------------
def _django():
    import django

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings")
    django.setup()
    from django.test.utils import setup_test_environment

    setup_test_environment()  # the test client's host; mail stays in memory


def _prepare(size: str, scale: float) -> dict:
    """Migrates, seeds and fills this size's database (run once, before the rounds)."""
    _django()
    from django.core.management import call_command
    from django.db import connection

    from bench.scale_fill import LARGE, SMALL, fill

    call_command("migrate", verbosity=0)
    call_command("seed_catalog", verbosity=0)
    people, api_key = _people()
    sizes = SMALL if size == "small" else LARGE.scaled(scale)
    started = time.monotonic()
    with connection.cursor() as cursor:
        counts = fill(cursor, sizes, reseller_id=people["rita"].memberships.get().organisation_id)
    return {"counts": counts, "fill_s": time.monotonic() - started, "api_key": api_key}


def _measure(repeats: int, api_key: str) -> dict:
    """One round: each page ``repeats`` times (after a warm-up request), its queries and size."""
    _django()
    from django.db import connection
    from django.test import Client
    from django.test.utils import CaptureQueriesContext

    from portal.accounts.models import User
    from tests.factories import verified_login

    people = {u.username: u for u in User.objects.filter(username__in=("alice", "rita", "sam", "olga"))}
    results = {}
    for who, url in _pages(people):
        client = Client()
        if who == "api":
            client.defaults["HTTP_AUTHORIZATION"] = f"Api-Key {api_key}"
        else:
            verified_login(client, people[who])  # past the second factor: staff must have one
        client.get(url)  # warm-up: caches, the first connection
        times, queries, size_b = [], 0, 0
        for _ in range(repeats):
            with CaptureQueriesContext(connection) as ctx:
                t0 = time.perf_counter()
                response = client.get(url)
                times.append((time.perf_counter() - t0) * 1000)
            if response.status_code != 200:
                raise SystemExit(f"{who} {url}: HTTP {response.status_code}")
            queries, size_b = len(ctx), len(response.content)
        results[f"{who} {_label(url)}"] = {"queries": queries, "times": times, "bytes": size_b}
    return results


def _people():
    from portal.accounts.models import Membership, Organisation, User
    from portal.accounts.services import api_key_issue

    acme = Organisation.objects.create(name="Acme AI", slug="acme-ai")
    resale = Organisation.objects.create(name="GPU Resale", slug="gpu-resale",
                                         kind=Organisation.Kind.RESELLER)
    client_org = Organisation.objects.create(name="Resale Client", slug="resale-client", parent=resale)
    people = {
        "alice": User.objects.create(username="alice"),
        "rita": User.objects.create(username="rita"),
        "sam": User.objects.create(username="sam", is_staff=True, staff_role="approver"),
        "olga": User.objects.create(username="olga", is_staff=True, staff_role="operator"),
    }
    Membership.objects.create(user=people["alice"], organisation=acme)
    Membership.objects.create(user=people["rita"], organisation=resale,
                              role=Membership.Role.RESELLER_ADMIN)
    assert client_org.parent_id == resale.pk
    key = api_key_issue(organisation=resale, name="bench", scopes=["read"])
    return people, key.plaintext


def _pages(people) -> list[tuple[str, str]]:
    from portal.orders.models import Order
    from portal.orders.states import OrderState
    from portal.quotes.models import Quote
    from provisioning.models import Node

    acme = people["alice"].memberships.get().organisation
    resale = people["rita"].memberships.get().organisation
    mine = Order.objects.filter(organisation=acme).order_by("-created_at", "-pk")
    newest, active = mine.first(), mine.filter(state=OrderState.ACTIVE).first()
    quote = Quote.objects.filter(organisation=acme).order_by("-created_at").first()
    theirs = Order.objects.filter(organisation__parent=resale).order_by("-created_at").first()
    pending = Order.objects.filter(state=OrderState.PENDING_APPROVAL).order_by("state_changed_at").first()
    node = Node.objects.filter(state="active").order_by("hostname").first()
    older = _older_cursor(people["alice"])
    return [
        ("alice", "/"), ("alice", "/orders/"), ("alice", f"/orders/?older={older}"),
        ("alice", f"/orders/{newest.reference}/"), ("alice", f"/orders/{active.reference}/server/"),
        ("alice", f"/configure/quotes/{quote.reference}/"),
        ("alice", "/catalog/"),
        ("rita", "/"), ("rita", "/orders/"), ("rita", f"/orders/{theirs.reference}/"),
        ("sam", "/"), ("sam", "/orders/"), ("sam", "/ops/approvals/"),
        ("sam", f"/ops/approvals/{pending.reference}/nodes/"), ("sam", f"/orders/{pending.reference}/"),
        ("olga", "/"), ("olga", "/ops/nodes/"), ("olga", "/ops/nodes/?state=ready"),
        ("olga", "/ops/nodes/?q=scale-gpu-0042"), ("olga", f"/ops/nodes/{node.pk}/"),
        ("api", "/api/v1/orders"), ("api", "/api/v1/quotes"), ("api", f"/api/v1/orders/{theirs.reference}"),
        ("api", f"/api/v1/orders/{theirs.reference}/events"), ("api", "/api/v1/catalog"),
    ]


def _older_cursor(user) -> str:
    from django.test import Client

    from tests.factories import verified_login

    client = verified_login(Client(), user)
    html = client.get("/orders/").content.decode()
    return html.split('rel="next"')[0].rsplit("older=", 1)[1].split('"')[0] if 'rel="next"' in html else ""


def _label(url: str) -> str:
    """The page's shape, not its ids: /orders/OS-0000AB12/ → /orders/<ref>/."""
    import re

    url = re.sub(r"OS?-[0-9A-F]+", "<ref>", url)  # the filler's references (OS-…) and others
    url = re.sub(r"QS?-[0-9A-F]+", "<quote>", url)
    url = re.sub(r"/\d+/", "/<id>/", url)
    return re.sub(r"older=[0-9.]*", "older=<cursor>", url)


# --- both sizes and the table ------------------------------------------------------------------
def _child(size: str, *args: str) -> dict:
    env = {**os.environ, "DATABASE_URL": _database_url(f"trainyard_scale_{size}")}
    done = subprocess.run([sys.executable, __file__, *args], env=env, cwd=REPO,
                          capture_output=True, text=True)
    if done.returncode:  # the log of the failed process, then stop
        sys.stderr.write(done.stderr[-6000:])
        raise SystemExit(f"{size}: {args[0]} failed (exit {done.returncode})")
    return json.loads(done.stdout.strip().splitlines()[-1])


def _run(scale: float, repeats: int, rounds: int) -> dict:
    """Both sizes side by side: filled first, then measured in alternating rounds (a shared
    machine changes speed from one minute to the next; SMALL then LARGE minutes apart would
    put that change into the ratio)."""
    runs = {size: {"pages": {}} for size in ("small", "large")}
    try:
        for size, run in runs.items():
            _admin(f"DROP DATABASE IF EXISTS trainyard_scale_{size} WITH (FORCE)")
            _admin(f"CREATE DATABASE trainyard_scale_{size}")
            run.update(_child(size, "--prepare", size, "--scale", str(scale)))
            print(f"{size.upper()}: filled in {run['fill_s']:.0f} s: " + ", ".join(
                f"{t.split('_', 1)[1]} {n:,}" for t, n in run["counts"].items()), flush=True)
        for _ in range(rounds):
            for size, run in runs.items():
                got = _child(size, "--measure", "--repeats", str(repeats), "--api-key", run["api_key"])
                for page, result in got.items():
                    into = run["pages"].setdefault(page, {"times": []})
                    into.update(queries=result["queries"], bytes=result["bytes"])
                    into["times"] += result["times"]
    finally:
        for size in runs:
            _admin(f"DROP DATABASE IF EXISTS trainyard_scale_{size} WITH (FORCE)")
    for run in runs.values():
        for result in run["pages"].values():
            times = sorted(result.pop("times"))
            result["p50"] = statistics.median(times)
            result["p95"] = times[min(len(times) - 1, round(0.95 * (len(times) - 1)))]
    return runs


def _table(small: dict, large: dict) -> list[str]:
    head = (f"{'page (who, path)':<44} {'queries':>9} {'p50 ms':>15} {'p95 ms':>15} {'KB':>13} "
            f"{'p95 ×':>6}  targets")
    lines = [head, f"{'':<44} {'S / L':>9} {'S / L':>15} {'S / L':>15} {'S / L':>13}", "-" * len(head)]
    misses = 0
    for page, s in small["pages"].items():
        big = large["pages"][page]
        ratio = big["p95"] / s["p95"] if s["p95"] else float("inf")
        missed = [what for what, bad in (("queries", big["queries"] > MAX_QUERIES),
                                         ("p95", ratio > MAX_RATIO),
                                         ("size", big["bytes"] > MAX_BYTES)) if bad]
        misses += bool(missed)
        lines.append(
            f"{page[:44]:<44} {s['queries']:>4}/{big['queries']:<4} "
            f"{s['p50']:>7.1f}/{big['p50']:<7.1f} {s['p95']:>7.1f}/{big['p95']:<7.1f} "
            f"{s['bytes'] / 1024:>6.1f}/{big['bytes'] / 1024:<6.1f} {ratio:>5.2f}×  "
            f"{'ok' if not missed else 'MISSED: ' + ', '.join(missed)}")
    lines.append(f"{len(small['pages'])} pages and API reads; {misses} miss a target at LARGE "
                 f"(≤ {MAX_QUERIES} queries, p95 ≤ {MAX_RATIO:.0f}× SMALL, ≤ {MAX_BYTES // 1024} KB).")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--scale", type=float, default=1.0, help="LARGE times this (default 1)")
    parser.add_argument("--large-orders", type=int, help="LARGE scaled to this many orders")
    parser.add_argument("--repeats", type=int, default=5, help="requests per page, size and round")
    parser.add_argument("--rounds", type=int, default=3, help="alternating rounds of SMALL and LARGE")
    parser.add_argument("--prepare", choices=("small", "large"), help=argparse.SUPPRESS)
    parser.add_argument("--measure", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--api-key", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.large_orders:
        args.scale = args.large_orders / 50_000
    if args.prepare:
        print(json.dumps(_prepare(args.prepare, args.scale)))
        return
    if args.measure:
        print(json.dumps(_measure(args.repeats, args.api_key)))
        return
    if not os.environ.get("DATABASE_URL", "").startswith("postgres"):
        # `make bench` on the embedded default (SQLite): say why nothing is measured, go on.
        print("scale_bench: skipped: set DATABASE_URL to a PostgreSQL server (the bench creates "
              "and drops its own databases there).")
        return
    runs = _run(args.scale, args.repeats, args.rounds)
    print(f"\nscale_bench --scale {args.scale:g} --repeats {args.repeats} --rounds {args.rounds} "
          f"({args.repeats * args.rounds} requests per page and size)\n")
    print("\n".join(_table(runs["small"], runs["large"])))


if __name__ == "__main__":
    main()
