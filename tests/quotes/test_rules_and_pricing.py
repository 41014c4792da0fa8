"""The pure pricing and rules of the configurator (no database)."""

from decimal import Decimal
from types import SimpleNamespace as NS

import pytest

from portal.quotes import pricing
from portal.quotes import rules as c
from portal.quotes.configuration import Configuration

SKU = NS(name="8× H100 SXM5", price_hourly=Decimal("23.60"), price_monthly=Decimal("14643.80"))
NVME_1 = NS(slug="nvme-1tb-single", size_tb=1, raid="single", price_monthly=Decimal("28.00"))
NVME_4 = NS(slug="nvme-4tb-raid0", size_tb=4, raid="raid0", price_monthly=Decimal("112.00"))
NVME_4_10 = NS(slug="nvme-4tb-raid10", size_tb=4, raid="raid10", price_monthly=Decimal("224.00"))
ETH_1 = NS(slug="eth-1g", name="1 Gb/s Ethernet", kind="ethernet", speed_gbps=1, on_request=False,
           is_default=True, price_monthly=Decimal("0"))
ETH_25 = NS(slug="eth-25g", name="25 GbE", kind="ethernet", speed_gbps=25, on_request=False,
            is_default=False, price_monthly=Decimal("140"))
ETH_100 = NS(slug="eth-100g", name="100 GbE (RoCE)", kind="ethernet", speed_gbps=100, on_request=False,
             is_default=False, price_monthly=Decimal("450"))
IB = NS(slug="ib-ndr-400g", name="InfiniBand NDR 400 Gb/s", kind="infiniband", speed_gbps=400,
        on_request=True, is_default=False, price_monthly=Decimal("2200"))
MINIO = NS(name="On-site MinIO", price_per_tb_monthly=Decimal("15.00"))


def config(**kw):
    return Configuration(**({"sku": SKU, "nvme": NVME_1, "network": ETH_1} | kw))


def test_it_prices_a_single_node():
    price = pricing.price(config())
    assert [line.label for line in price.lines] == ["8× H100 SXM5", "NVMe 1 TB, single"]
    assert price.monthly == Decimal("14671.80")
    assert price.hourly == Decimal("23.60") + Decimal("0.04")  # $28/month over 730 h


def test_it_multiplies_per_node_items_and_adds_storage():
    price = pricing.price(config(node_count=2, nvme=NVME_4, network=IB, storage_provider=MINIO,
                                 storage_tb=10))
    labels = [line.label for line in price.lines]
    assert labels == ["8× H100 SXM5 × 2 nodes", "NVMe 4 TB, raid0 × 2 nodes",
                      "InfiniBand NDR 400 Gb/s × 2 nodes", "Object storage 10 TB (On-site MinIO)"]
    assert price.monthly == Decimal("14643.80") * 2 + 224 + 4400 + 150
    assert price.hourly == sum(line.hourly for line in price.lines)


def test_a_larger_nvme_costs_more():
    assert pricing.price(config(nvme=NVME_4)).hourly > pricing.price(config(nvme=NVME_1)).hourly


def test_one_gigabit_ethernet_is_for_single_node_orders_only():
    assert not c.check(config())
    [msg] = c.check(config(node_count=2))
    assert (msg.level, msg.field) == ("error", "network")
    assert "single-node orders only" in msg.text


def test_multi_node_needs_infiniband_or_100_gbe():
    [msg] = c.check(config(node_count=4, network=ETH_25))
    assert msg.level == "error" and "InfiniBand or at least 100 GbE" in msg.text
    assert not c.check(config(node_count=4, network=ETH_100))
    assert [m.level for m in c.check(config(node_count=4, network=IB))] == ["info"]


def test_infiniband_is_on_request():
    [msg] = c.check(config(network=IB))
    assert msg.level == "info" and "on request" in msg.text


def test_nvme_below_the_recommendation_warns():
    [msg] = c.check(config(), recommended_nvme_tb=3.2)
    assert (msg.level, msg.field) == ("warning", "nvme")
    assert "below the 3.2 TB recommended" in msg.text
    assert not c.check(config(nvme=NVME_4), recommended_nvme_tb=3.2)


@pytest.mark.parametrize(("stock", "nodes", "text"), [
    (0, 1, "out of stock"), (1, 2, "Only 1 8× H100 SXM5 node in stock for 2 requested")])
def test_stock_shortfalls_say_so(stock, nodes, text):
    msgs = c.check(config(node_count=nodes, network=IB), stock=stock)
    warning = next(m for m in msgs if m.field == "sku")
    assert warning.level == "warning" and text in warning.text
    assert not [m for m in c.check(config(), stock=None) if m.field == "sku"]


def test_a_bucket_needs_a_provider():
    evaluation = c.evaluate(config(storage_tb=5))
    assert not evaluation.ok
    assert evaluation.errors[0].field == "storage_provider"


def test_pick_nvme_takes_the_smallest_big_enough_option_and_matches_raid():
    options = [NVME_4_10, NVME_1, NVME_4]
    assert c.pick_nvme(options, 0.5) is NVME_1
    assert c.pick_nvme(options, 2.1, "raid10") is NVME_4_10
    assert c.pick_nvme(options, 2.1) is NVME_4
    assert c.pick_nvme(options, 50) is NVME_4_10 or c.pick_nvme(options, 50).size_tb == 4


def test_pick_network_follows_the_rules():
    options = [IB, ETH_25, ETH_1, ETH_100]
    assert c.pick_network(options, nodes=1) is ETH_1
    assert c.pick_network(options, nodes=2) is IB
    assert c.pick_network(options, nodes=2, kind="ethernet", speed_gbps=100) is ETH_100
