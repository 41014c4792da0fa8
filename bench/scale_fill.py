"""Years of data, written in bulk: organisations, members, quotes, orders with their events, runs,
step runs and log lines, nodes with their events and health checks — as INSERT … SELECT over
generate_series (PostgreSQL), so LARGE (5.5 million rows) takes minutes, not hours.

Used by ``bench/scale_bench.py`` and by ``tests/test_query_plans.py``. Needs the catalog (SKUs,
NVMe and network options) in the database; spreads the orders over every customer
organisation already there too (the callers' named people get their share), and, given a
reseller, makes every 50th new organisation one of its customers. Ends with ANALYZE so the
planner sees the sizes (inside a transaction too: tests run in one).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from portal.core.crypto import encrypt
from provisioning.states import STEPS, RunKind


@dataclass(frozen=True)
class Sizes:
    organisations: int
    orders: int
    nodes: int
    health_checks: int
    quotes: int
    events_per_order: int = 8
    runs_per_order: float = 1.94  # ~97k runs at 50k orders
    steps_per_run: int = 8  # less the runs' share without steps: ~750k at LARGE
    log_lines_per_step: int = 2
    events_per_node: int = 96
    pending_orders: int = 60  # the approval queue

    def scaled(self, factor: float) -> Sizes:
        def n(value: int, least: int = 1) -> int:
            return max(least, round(value * factor))
        return replace(self, organisations=n(self.organisations, 2), orders=n(self.orders, 10),
                       nodes=n(self.nodes, 10), health_checks=n(self.health_checks, 10),
                       quotes=n(self.quotes, 10), pending_orders=n(self.pending_orders, 2))


SMALL = Sizes(organisations=10, orders=100, nodes=50, health_checks=2_000, quotes=40,
              events_per_order=8, events_per_node=10, pending_orders=12)
LARGE = Sizes(organisations=1_000, orders=50_000, nodes=5_000, health_checks=2_000_000,
              quotes=20_000)

# Order states by share (per 100 orders), after the pending ones the queue holds.
ORDER_STATES = [("terminated", 55), ("active", 25), ("cancelled", 8), ("rejected", 5),
                ("provision_failed", 2), ("provisioning", 2), ("approved", 1), ("draft", 2)]
NODE_STATES = [("active", 55), ("ready", 30), ("maintenance", 5), ("failed_deploy", 2),
               ("reserved", 3), ("enrolled", 3), ("wiping", 2)]


def _case(expr: str, shares: list[tuple[str, int]]) -> str:
    """A CASE over ``expr`` % 100 that gives each value its share."""
    parts, upto = [], 0
    for value, share in shares:
        upto += share
        parts.append(f"WHEN ({expr}) % 100 < {upto} THEN '{value}'")
    return "CASE " + " ".join(parts) + f" ELSE '{shares[0][0]}' END"


def fill(cursor, sizes: Sizes, *, reseller_id: int | None = None) -> dict[str, int]:
    """Writes ``sizes`` worth of rows; returns the row count of each table it filled."""
    s = sizes
    reseller = int(reseller_id) if reseller_id is not None else "NULL"
    no_secret = encrypt("")  # the encrypted columns hold a token even when empty
    sql = [
        # organisations and one member each (the membership rule sees a realistic table)
        f"""INSERT INTO accounts_organisation (name, slug, kind, created_at, parent_id, require_two_factor)
            SELECT 'Scale lab ' || g, 'scale-lab-' || g, 'customer', now() - g * interval '1 hour',
                   CASE WHEN g % 50 = 0 THEN {reseller}::bigint END, false
            FROM generate_series(1, {s.organisations}) g""",
        f"""INSERT INTO accounts_user (password, is_superuser, username, first_name, last_name, email,
                                       is_staff, is_active, date_joined, staff_role)
            SELECT '!', false, 'scale-user-' || g, '', '', 'scale-user-' || g || '@example.com',
                   false, true, now(), ''
            FROM generate_series(1, {s.organisations}) g""",
        """INSERT INTO accounts_membership (role, user_id, organisation_id)
            SELECT 'member', u.id, o.id FROM accounts_user u
            JOIN accounts_organisation o ON o.slug = 'scale-lab-' || substr(u.username, 12)
            WHERE u.username LIKE 'scale-user-%'""",
        "CREATE TEMP TABLE s_org AS SELECT row_number() OVER (ORDER BY id) - 1 AS n, id "
        "FROM accounts_organisation WHERE kind = 'customer'",
        "CREATE TEMP TABLE s_sku AS SELECT row_number() OVER (ORDER BY id) - 1 AS n, id, "
        "gpu_count FROM catalog_serversku",
        # quotes: one per order for the first ones, spread over three years like the orders
        f"""INSERT INTO orders_quote (reference, node_count, storage_tb, plan, price_lines, price_hourly,
                price_monthly, currency, valid_until, created_at, network_id, nvme_id, organisation_id,
                sku_id, storage_access_key_id, storage_bucket, storage_endpoint_url,
                storage_retention_days, storage_secret_key)
            SELECT 'QS-' || upper(lpad(to_hex(g), 8, '0')), 1, 0, '{{}}', '[]', 12.50, 9125.00, 'USD',
                   now() - (({s.quotes} - g) * interval '78 minutes') + interval '14 days',
                   now() - (({s.quotes} - g) * interval '78 minutes'),
                   (SELECT min(id) FROM catalog_networkoption), (SELECT min(id) FROM catalog_nvmeoption),
                   o.id, k.id, '{no_secret}', '', '', 30, '{no_secret}'
            FROM generate_series(1, {s.quotes}) g
            JOIN s_org o ON o.n = g % (SELECT count(*) FROM s_org)
            JOIN s_sku k ON k.n = g % (SELECT count(*) FROM s_sku)""",
        "CREATE TEMP TABLE s_quote AS SELECT row_number() OVER (ORDER BY id) AS n, id "
        "FROM orders_quote WHERE reference LIKE 'QS-%'",
        # orders, newest last; the first ones wait for approval
        f"""INSERT INTO orders_order (reference, node_count, storage_tb, plan, price_lines, price_hourly,
                price_monthly, currency, state, target_state, state_changed_at, rejection_reason,
                failure_reason, created_at, updated_at, network_id, nvme_id, organisation_id, sku_id,
                storage_access_key_id, storage_bucket, storage_endpoint_url, storage_retention_days,
                storage_secret_key, wipe_data_devices, quote_id)
            SELECT 'OS-' || upper(lpad(to_hex(g), 8, '0')), CASE WHEN g % 10 = 0 THEN 2 ELSE 1 END, 0, '{{}}',
                   '[]', 12.50, 9125.00, 'USD',
                   CASE WHEN g > {s.orders - s.pending_orders} THEN 'pending_approval'
                        ELSE {_case('g', ORDER_STATES)} END,
                   '', now() - (({s.orders} - g) * interval '31 minutes'), '', '',
                   now() - (({s.orders} - g) * interval '31 minutes'), now(),
                   (SELECT min(id) FROM catalog_networkoption), (SELECT min(id) FROM catalog_nvmeoption),
                   o.id, k.id, '{no_secret}', '', '', 30, '{no_secret}', false, q.id
            FROM generate_series(1, {s.orders}) g
            JOIN s_org o ON o.n = (g * 7) % (SELECT count(*) FROM s_org)
            JOIN s_sku k ON k.n = g % (SELECT count(*) FROM s_sku)
            LEFT JOIN s_quote q ON q.n = g""",
        "CREATE TEMP TABLE s_order AS SELECT row_number() OVER (ORDER BY id) AS n, id, state, "
        "created_at FROM orders_order WHERE reference LIKE 'OS-%'",
        f"""INSERT INTO orders_orderevent (at, transition, from_state, to_state, note, order_id)
            SELECT o.created_at + e * interval '1 minute', 'step' || e, 'draft', o.state, '', o.id
            FROM s_order o CROSS JOIN generate_series(1, {s.events_per_order}) e""",
        # nodes: the fleet, with its events and checks every five minutes
        f"""INSERT INTO provisioning_node (hostname, management_address, driver, driver_options,
                fabric_group, nvme_devices, notes, state, state_changed_at, created_at, sku_id, fence,
                fabric_address, baseline, wipe_method, health_ok, health_checked_at, health_failures)
            SELECT 'scale-gpu-' || lpad(g::text, 5, '0'), '10.' || (g / 65536) || '.' || (g / 256 % 256)
                   || '.' || (g % 256), 'simulated', '{{"delay_scale": 0}}', 'leaf-' || (g % 40), '[]', '',
                   {_case('g * 3', NODE_STATES)}, now(), now(), k.id, 0, '', '[]', 'discard',
                   g % 97 <> 0, now(), CASE WHEN g % 97 = 0 THEN 3 ELSE 0 END
            FROM generate_series(1, {s.nodes}) g
            JOIN s_sku k ON k.n = g % (SELECT count(*) FROM s_sku)""",
        "CREATE TEMP TABLE s_node AS SELECT row_number() OVER (ORDER BY id) - 1 AS n, id "
        "FROM provisioning_node WHERE hostname LIKE 'scale-gpu-%'",
        f"""INSERT INTO provisioning_nodeevent (at, transition, from_state, to_state, note, node_id)
            SELECT now() - ({s.events_per_node} - e) * interval '9 hours', 'note', 'ready', 'ready',
                   'scale event ' || e, n.id
            FROM s_node n CROSS JOIN generate_series(1, {s.events_per_node}) e""",
        f"""INSERT INTO provisioning_healthcheck (at, ok, gpu_count, expected_gpu_count, problems, raw,
                                                  node_id)
            SELECT now() - (g / {s.nodes}) * interval '5 minutes', g % 97 <> 0, 8, 8, '[]',
                   'GPU 0..7: 52 C, 0 ECC; nvidia-smi 550.54, driver ok; dcgm 3.3 health ok', n.id
            FROM generate_series(1, {s.health_checks}) g
            JOIN s_node n ON n.n = g % {s.nodes}""",
        # runs of the orders, their steps (on the fleet's nodes) and the steps' log lines
        f"""INSERT INTO provisioning_provisioningrun (kind, status, created_at, started_at, finished_at,
                                                      error, order_id, queue_error)
            SELECT CASE WHEN r = 1 THEN 'provision' ELSE 'terminate' END, 'succeeded',
                   o.created_at + r * interval '1 hour', o.created_at + r * interval '1 hour',
                   o.created_at + r * interval '2 hours', '', o.id, ''
            FROM s_order o CROSS JOIN generate_series(1, 2) r
            WHERE r = 1 OR o.n % 100 < {round((s.runs_per_order - 1) * 100)}""",
    ] + [
        f"""INSERT INTO provisioning_steprun (step, position, status, attempts, claimed_by, error, result,
                node_id, run_id, executions, fence, stop_requested, started_at, finished_at)
            SELECT (ARRAY{names})[p], p, 'succeeded', 1, '', '', '{{}}', n.id, r.id, 1, 0, false,
                   r.started_at, r.finished_at
            FROM provisioning_provisioningrun r
            JOIN s_node n ON n.n = r.id % {s.nodes}
            CROSS JOIN generate_series(1, {min(s.steps_per_run, len(names))}) p
            WHERE r.kind = '{kind}'"""
        for kind, names in (("provision", [spec.name for spec in STEPS[RunKind.PROVISION]]),
                            ("terminate", [spec.name for spec in STEPS[RunKind.TERMINATE]]))
    ] + [
        f"""INSERT INTO provisioning_steplogline (at, attempt, text, step_run_id, staff_only)
            SELECT sr.started_at, 1, 'step ' || sr.step || ': line ' || l || ' of its output', sr.id, l = 2
            FROM provisioning_steprun sr CROSS JOIN generate_series(1, {s.log_lines_per_step}) l""",
    ]
    for statement in sql:
        cursor.execute(statement)
    cursor.execute("DROP TABLE s_org, s_sku, s_quote, s_order, s_node")
    tables = ["accounts_organisation", "orders_quote", "orders_order", "orders_orderevent",
              "provisioning_node", "provisioning_nodeevent", "provisioning_healthcheck",
              "provisioning_provisioningrun", "provisioning_steprun", "provisioning_steplogline"]
    counts = {}
    for table in tables:
        cursor.execute(f"ANALYZE {table}")
        cursor.execute(f"SELECT count(*) FROM {table}")
        counts[table] = cursor.fetchone()[0]
    for table in ("accounts_user", "accounts_membership"):
        cursor.execute(f"ANALYZE {table}")
    return counts
