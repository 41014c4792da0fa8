"""One node never reads "1× 8× …" (the SKU's name already counts its GPUs), and prices read in
the one money format ($1,200.00) wherever they appear."""

import re

from portal.orders.notifications import order_event_notify
from portal.orders.staff_notifications import order_moved_notify_staff
from portal.quotes.forms import ConfiguratorForm
from portal.sizing.catalog_data import catalog_from_seed
from portal.sizing.recommend import Goal, recommend
from tests.factories import H100_SKU, make_order
from tests.orders.test_staff_notifications import _run_queued
from tests.sizing.test_deliverable import OPTIONS, WORK, with_stock


def test_the_order_label_counts_nodes_only_for_clusters(catalog, people):
    single = make_order(people.acme)
    cluster = make_order(people.acme, node_count=2, network="ib-ndr-400g")
    assert single.servers_label == "8× H100 SXM5 80GB (NVSwitch)"
    assert cluster.servers_label == "2 × 8× H100 SXM5 80GB (NVSwitch)"


def test_the_customer_email_has_no_doubled_count(catalog, people, mailoutbox):
    order = make_order(people.acme, by=people.alice, sku="1x-l4-24gb")
    event = order.events.create(transition="queue_for_approval", from_state="submitted",
                                to_state="pending_approval")
    assert order_event_notify(event_id=event.pk) == 1
    body = mailoutbox[0].body
    assert f"Order {order.reference} (1× L4 (PCIe)): Pending approval." in body
    assert "1× 1×" not in body


def test_the_staff_email_and_dashboard_have_no_doubled_count(catalog, people, login, mailoutbox,
                                                             monkeypatch,
                                                             django_capture_on_commit_callbacks):
    people.sam.email = "sam@example.com"
    people.sam.save()
    order = make_order(people.acme, sku=H100_SKU, state="pending_approval")
    with django_capture_on_commit_callbacks() as callbacks:
        order_moved_notify_staff(order, "pending_approval")
    _run_queued(callbacks, monkeypatch)
    [staff_mail] = [m for m in mailoutbox if m.subject.startswith("[Trainyard staff]")]
    assert f"New order {order.reference}: 8× H100 SXM5 80GB (NVSwitch) for Acme AI" in staff_mail.body
    html = login(people.sam).get("/").content.decode()
    assert "8× H100 SXM5 80GB (NVSwitch) · waiting" in html and "1× 8×" not in html


def test_the_recommenders_stock_sentence_has_no_doubled_count():
    seed = catalog_from_seed()
    free = recommend(WORK, Goal("cheapest"), with_stock(seed, {}), OPTIONS)
    first = free.best
    assert first.nodes == 1
    rec = recommend(WORK, Goal("cheapest"), with_stock(seed, {first.sku: 0}), OPTIONS)
    sentence = next(e for e in rec.explanations if "would be cheaper" in e)
    assert f"{first.sku_name} would be cheaper" in sentence
    assert f"1 × {first.sku_name}" not in sentence


def test_configurator_option_labels_use_the_money_format(catalog):
    form = ConfiguratorForm()
    labels = [label for field in ("sku", "nvme", "network", "storage_provider")
              for _value, label in form.fields[field].choices]
    prices = [p for label in labels for p in re.findall(r"\$[\d,.]+", label)]
    assert prices and all(re.fullmatch(r"\$\d{1,3}(,\d{3})*\.\d{2}", p) for p in prices), prices
    assert any("," in p for p in prices)  # thousands are grouped: "$1,200.00/mo", not "$1200.00/mo"
