"""A customer's month walked through the services, and the invoice reconciled against the quoted
prices by an independent count (issue 31, "Checked by").

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/trainyard .venv/bin/python bench/billing_reconcile.py

In a fresh database (BENCH_DB, default ``trainyard_billing_reconcile``, dropped at the end): a
2-node H100 server quoted by the configurator's pricing (``quote_create``) and ordered
(``order_place``); hand-over, a node out for 6.5 h, an operator's price change mid-hour
(``order_price_change``) and the termination are the ledger writes fulfilment makes
(``usage_sync``), at chosen instants of March 2026 (the provisioning pipeline itself is not run);
a 1-node L4 server used 100 h; then the month close, the invoice finalised, a credit note for a
failed provisioning charged, finalised.

The reconciliation does not use the billing code: it walks each node's measured time hour by
hour from the quote's rates (a node bills 1/nodes of the line), bills each started hour at the
rate in force where it starts, caps each calendar month at the monthly rate (weighted by the
hours at each rate), and compares with each invoice line, to the cent. The L4 line is also
compared with ``job_price`` for its hours from its hand-over (the quote's own rule).
"""

from __future__ import annotations

import sys
from datetime import UTC, datetime, timedelta
from decimal import ROUND_HALF_UP, Decimal
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.billing_bench import seeded_database  # noqa: E402


def at(*args) -> datetime:
    return datetime(*args, tzinfo=UTC)


HAND_OVER, TERMINATED = at(2026, 3, 3, 9, 40), at(2026, 3, 29, 18, 15)
NODE_2_OUT = (at(2026, 3, 10, 14, 5), at(2026, 3, 10, 20, 35))
PRICE_CHANGE = at(2026, 3, 15, 12, 30)
L4_START, L4_HOURS = at(2026, 3, 20, 7, 0), 100


def _expected(pieces, nodes: int) -> tuple[int, Decimal]:
    """Independent count: ``pieces`` are (start, end, hourly, monthly) of the whole line; hours
    start where the measured time reaches each whole hour (pauses are not measured)."""
    hours, measured, rates = 0, timedelta(0), {}
    for start, end, hourly, monthly in pieces:
        while measured + (end - start) > timedelta(hours=hours):
            rates.setdefault((hourly, monthly), 0)
            rates[(hourly, monthly)] += 1
            hours += 1
        measured += end - start
    hourly_total = sum((h / nodes * n for (h, _), n in rates.items()), Decimal(0))
    cap = sum((m / nodes * n for (_, m), n in rates.items()), Decimal(0)) / hours
    return hours, min(hourly_total, cap).quantize(Decimal("0.01"), ROUND_HALF_UP)


def _walk():
    from portal.accounts.models import Membership, Organisation, User
    from portal.billing import invoices
    from portal.billing.models import BillingProfile, Invoice
    from portal.billing.selectors import month_of
    from portal.billing.services import order_price_change, usage_sync
    from portal.catalog.models import NetworkOption, NvmeOption, ServerSKU, StackOption
    from portal.orders.services import order_place
    from portal.quotes.configuration import Configuration
    from portal.quotes.services import quote_create

    org = Organisation.objects.create(name="Reconcile Labs", slug="reconcile-labs")
    alice = User.objects.create_user(username="rec-alice", email="a@example.com", password="x" * 16)
    Membership.objects.create(user=alice, organisation=org)
    olga = User.objects.create_user(username="rec-olga", email="o@example.com", password="x" * 16,
                                    staff_role=User.StaffRole.OPERATOR, is_staff=True)
    BillingProfile.objects.create(organisation=org, legal_name="Reconcile Labs Inc.",
                                  address="1 Main St\nBoston, MA", country="US")

    def order(sku: str, nodes: int, network: str):
        config = Configuration(sku=ServerSKU.objects.get(slug=sku), nvme=NvmeOption.objects.first(),
                               network=NetworkOption.objects.get(slug=network), node_count=nodes,
                               strategy=StackOption.objects.get(slug="fsdp"),
                               tracker=StackOption.objects.get(slug="tensorboard"))
        return order_place(quote=quote_create(organisation=org, by=alice, configuration=config), by=alice)

    h100 = order("8x-h100-sxm-80gb", 2, "ib-ndr-400g")
    quoted = (h100.price_hourly, h100.price_monthly)
    both, one = {1: "gpu-a", 2: "gpu-b"}, {1: "gpu-a"}
    usage_sync(order=h100, nodes=both, storage=False, at=HAND_OVER, cause="hand-over")
    usage_sync(order=h100, nodes=one, storage=False, at=NODE_2_OUT[0], cause="node failed")
    usage_sync(order=h100, nodes=both, storage=False, at=NODE_2_OUT[1], cause="node back")
    new = (quoted[0] * Decimal("0.9")).quantize(Decimal("0.01")), quoted[1]
    order_price_change(order=h100, hourly=new[0], monthly=new[1], by=olga, at=PRICE_CHANGE)
    usage_sync(order=h100, nodes={}, storage=False, at=TERMINATED, cause="termination")
    l4 = order("1x-l4-24gb", 1, "eth-100g")
    usage_sync(order=l4, nodes={7: "gpu-l4"}, storage=False, at=L4_START, cause="hand-over")
    usage_sync(order=l4, nodes={}, storage=False, at=L4_START + timedelta(hours=L4_HOURS), cause="end")

    [pk] = invoices.month_close(period=month_of(HAND_OVER), now=at(2026, 4, 2))
    invoice = invoices.invoice_finalise(invoice=Invoice.objects.get(pk=pk), by=olga)
    credit = invoices.credit_note_create(invoice=invoice, amount="50.00", by=olga,
                                         reason="Failed provisioning charged")
    credit = invoices.invoice_finalise(invoice=credit, by=olga)
    return h100, l4, quoted, new, invoice, credit


def _rows(h100, l4, quoted, new, invoice):
    from portal.catalog.pricing import job_price

    lines = {line.key: line for line in invoice.lines.all()}
    node_1 = [(HAND_OVER, PRICE_CHANGE, *quoted), (PRICE_CHANGE, TERMINATED, *new)]
    node_2 = [(HAND_OVER, NODE_2_OUT[0], *quoted), (NODE_2_OUT[1], PRICE_CHANGE, *quoted),
              (PRICE_CHANGE, TERMINATED, *new)]
    l4_job = job_price(hourly_usd=l4.price_hourly, monthly_usd=l4.price_monthly, train_hours=L4_HOURS,
                       provisioning_hours=0, start=L4_START)
    rows = []
    for label, key, pieces, nodes in (("H100 node 1", f"{h100.pk}:node:1", node_1, 2),
                                      ("H100 node 2 (6.5 h out)", f"{h100.pk}:node:2", node_2, 2),
                                      ("L4 node", f"{l4.pk}:node:7", [(L4_START, L4_START + timedelta(
                                          hours=L4_HOURS), l4.price_hourly, l4.price_monthly)], 1)):
        hours, expected = _expected(pieces, nodes)
        line = lines[key]
        rows.append((label, hours, int(line.quantity), expected, line.amount))
    return rows, l4_job.total_usd, lines[f"{l4.pk}:node:7"].amount


def main() -> int:
    with seeded_database("trainyard_billing_reconcile", BILLING_GRANULARITY_S="3600"):
        from portal.billing import invoices

        invoices.invoice_issued_notify_task.delay = lambda pk: None  # no mail server here
        h100, l4, quoted, new, invoice, credit = _walk()
        rows, l4_quote, l4_line = _rows(h100, l4, quoted, new, invoice)
        print(f"H100 × 2 quoted at {quoted[0]} USD/h, {quoted[1]} USD/month (line); repriced "
              f"{new[0]} USD/h at {PRICE_CHANGE:%d %b %H:%M}; invoice {invoice.number}, credit note "
              f"{credit.number}\n")
        print("| item | hours counted | hours invoiced | expected USD | invoiced USD | difference |")
        print("| --- | --- | --- | --- | --- | --- |")
        for label, hours, billed, expected, amount in rows:
            print(f"| {label} | {hours} | {billed} | {expected:,} | {amount:,} | {amount - expected:+} |")
        total = sum((r[3] for r in rows), Decimal(0))
        print(f"| subtotal | | | {total:,} | {invoice.subtotal:,} | {invoice.subtotal - total:+} |")
        net = invoice.subtotal + credit.subtotal  # a credit note's amounts are negative
        print(f"| credit note | | | -50.00 | {credit.subtotal:,} | {credit.subtotal + 50:+} |")
        print(f"| net after credit | | | {total - 50:,} | {net:,} | {net - total + 50:+} |")
        print(f"\nL4, {L4_HOURS} h from {L4_START:%d %b %H:%M}: quote (job_price) {l4_quote:,} USD, "
              f"invoiced {l4_line:,} USD")
        ok = (all(r[3] == r[4] and r[1] == r[2] for r in rows) and l4_quote == l4_line
              and invoice.subtotal == total and net == total - 50)
        print("reconciled: every line equals the independent count" if ok else "MISMATCH")
        return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
