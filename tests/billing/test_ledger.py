"""The usage ledger on real PostgreSQL: written by the moves that cause it, priced as quoted."""

from datetime import UTC, datetime, timedelta
from decimal import Decimal
from zoneinfo import ZoneInfo

import pytest
from django.utils import timezone

from portal.billing.models import UsageInterval
from portal.billing.selectors import as_of, month_of, order_cost, usage_costs
from portal.billing.services import order_price_change, usage_sync
from portal.catalog.pricing import job_price
from portal.core.states import DomainError
from portal.orders.models import Order
from portal.orders.states import OrderState
from provisioning.fulfilment.metering import order_meter
from provisioning.fulfilment.orders import order_cancel, order_request_termination
from provisioning.pipeline import engine, runs
from provisioning.pipeline import services as pipeline_services
from provisioning.storage.models import Bucket
from provisioning.storage.services import buckets_delete_expired
from provisioning.storage.states import BucketState
from tests.factories import H100_SKU, approved_order, drain, make_node, make_order


def at(*args) -> datetime:
    return datetime(*args, tzinfo=UTC)


def _active(people, **kwargs) -> Order:
    order = make_order(people.acme, state=OrderState.ACTIVE, **kwargs)
    return order


class TestWrittenByTheMoves:
    def test_hand_over_opens_and_termination_closes_a_node_interval(self, catalog, people, sim_dir):
        node = make_node(sku=H100_SKU, state_dir=sim_dir)
        order = approved_order(people)
        run = order.runs.get()
        before_handover = timezone.now()
        drain(run.pk)
        order.refresh_from_db()
        [row] = UsageInterval.objects.filter(order=order)
        assert (row.kind, row.meter, row.label, row.opened_by, row.ended_at) == (
            "node", node.pk, node.hostname, "hand-over", None)
        # Billing starts at the hand-over, after every provisioning step.
        activated = order.events.get(to_state=OrderState.ACTIVE).at
        assert before_handover <= activated <= row.started_at
        assert row.hourly == order.price_hourly and row.share == 1
        order_request_termination(order=order, by=people.alice)
        row.refresh_from_db()
        assert row.ended_at is not None and row.closed_by == "termination requested"
        drain(order.runs.get(kind="terminate").pk)  # the wipe is ours: it bills nothing more
        assert UsageInterval.objects.filter(order=order).count() == 1
        assert UsageInterval.objects.get(order=order).ended_at == row.ended_at

    def test_a_failed_provisioning_is_never_billed(self, catalog, people, sim_dir):
        make_node(sku=H100_SKU, state_dir=sim_dir, fail={"deploy_os": {"permanent": "disk gone"}})
        order = approved_order(people)
        drain(order.runs.get().pk)
        order.refresh_from_db()
        assert order.state == OrderState.PROVISION_FAILED
        order_cancel(order=order, by=people.alice)
        assert not UsageInterval.objects.filter(order=order).exists()
        assert order_cost(order).so_far == Decimal("0.00")

    def test_a_node_swapped_during_provisioning_is_never_billed(self, catalog, people, sim_dir):
        bad = make_node(sku=H100_SKU, state_dir=sim_dir, hostname="gpu-bad",
                        fail={"deploy_os": {"permanent": "disk not found"}})
        spare = make_node(sku=H100_SKU, state_dir=sim_dir, hostname="gpu-spare")
        order = approved_order(people)
        run = order.runs.get()
        drain(run.pk)
        pipeline_services.run_swap_node(run=run, node=bad, by=people.sam)
        queue = runs.run_frontier(run)
        while queue:
            key = queue.pop(0)
            queue += engine.step_execute(run_id=key[0], node_id=key[1], step=key[2]).next_steps
        assert list(UsageInterval.objects.filter(order=order).values_list("meter", "label")) == [
            (spare.pk, "gpu-spare")]

    def test_a_cluster_bills_each_node_its_share(self, catalog, people, sim_dir):
        nodes = [make_node(sku=H100_SKU, state_dir=sim_dir, fabric_group="ib-a") for _ in range(2)]
        order = approved_order(people, node_count=2, network="ib-ndr-400g")
        drain(order.runs.get().pk)
        rows = UsageInterval.objects.filter(order=order)
        assert sorted(rows.values_list("meter", flat=True)) == sorted(n.pk for n in nodes)
        assert {(r.share, r.hourly) for r in rows} == {(2, order.price_hourly)}


class TestPricedAsQuoted:
    @pytest.mark.parametrize("start", [at(2026, 3, 1, 9, 41), at(2026, 1, 31, 23, 30),
                                       at(2028, 2, 29, 12)], ids=["march", "january-end", "leap-day"])
    @pytest.mark.parametrize("hours", [1, 5, 21, 300, 730, 731, 744, 745, 1000, 2000])
    def test_the_quotes_price_for_n_hours_is_the_ledgers(self, catalog, people, start, hours):
        """A two-node order used N hours from ``start``: the months' invoice figures (per node
        and month, to the cent) add up to the quote for N hours from the same hand-over."""
        order = _active(people, node_count=2, network="ib-ndr-400g")
        end = start + timedelta(hours=hours)
        usage_sync(order=order, nodes={1: "gpu-a", 2: "gpu-b"}, storage=False, at=start, cause="t")
        usage_sync(order=order, nodes={}, storage=False, at=end, cause="t")
        months, billed = month_of(start), Decimal(0)
        while months.start < end:
            billed += order_cost(order, at=as_of(months, now=end)).so_far
            months = month_of(months.end)
        quoted = job_price(hourly_usd=order.price_hourly, monthly_usd=order.price_monthly,
                           train_hours=hours, provisioning_hours=0, start=start)
        assert billed == quoted.total_usd

    def test_a_price_change_mid_hour_on_a_running_order(self, catalog, people):
        order = _active(people)
        old = order.price_hourly
        usage_sync(order=order, nodes={7: "gpu-7"}, storage=False, at=at(2026, 3, 2, 10), cause="t")
        with pytest.raises(DomainError, match="Only operators"):
            order_price_change(order=order, hourly="1.00", monthly="500", by=people.alice)
        order_price_change(order=order, hourly="30.00", monthly=order.price_monthly, by=people.olga,
                           at=at(2026, 3, 2, 10, 30))
        assert order.price_hourly == Decimal("30.00")
        assert order.events.filter(transition="reprice", actor=people.olga).exists()
        rows = list(UsageInterval.objects.filter(order=order))
        assert [(r.hourly, r.started_at, r.ended_at) for r in rows] == [
            (old, at(2026, 3, 2, 10), at(2026, 3, 2, 10, 30)),
            (Decimal("30.00"), at(2026, 3, 2, 10, 30), None)]
        cost = order_cost(order, at=at(2026, 3, 2, 11, 59))
        assert cost.so_far == old + Decimal("30.00")  # two started hours, not three

    def test_dst_change_is_measured_in_utc(self, catalog, people):
        order = _active(people)
        berlin = ZoneInfo("Europe/Berlin")
        # 25 October 2026: clocks go back at 03:00; 00:00 to 06:00 on the wall is 7 hours.
        start = datetime(2026, 10, 25, 0, 0, tzinfo=berlin)
        end = datetime(2026, 10, 25, 6, 0, tzinfo=berlin)
        usage_sync(order=order, nodes={1: "gpu-1"}, storage=False, at=start, cause="t")
        usage_sync(order=order, nodes={}, storage=False, at=end, cause="t")
        row = UsageInterval.objects.get(order=order)
        assert row.started_at == at(2026, 10, 24, 22) and row.ended_at == at(2026, 10, 25, 5)
        cost = order_cost(order, at=at(2026, 10, 30))
        assert cost.nodes[0].units == 7 and cost.so_far == 7 * order.price_hourly

    def test_month_boundary_and_leap_day(self, catalog, people):
        order = _active(people)
        usage_sync(order=order, nodes={1: "gpu-1"}, storage=False, at=at(2028, 2, 28, 23, 30), cause="t")
        usage_sync(order=order, nodes={}, storage=False, at=at(2028, 3, 1, 1, 30), cause="t")
        feb, mar = order_cost(order, at=at(2028, 2, 29, 23, 59)), order_cost(order, at=at(2028, 3, 5))
        # 26 h: the hours starting 28th 23:30 … 29th 23:30 in February, the 00:30 one in March.
        assert (feb.nodes[0].units, mar.nodes[0].units) == (25, 1)
        assert feb.so_far + mar.so_far == 26 * order.price_hourly

    def test_a_month_is_capped_at_the_monthly_rate(self, catalog, people):
        order = _active(people)
        usage_sync(order=order, nodes={1: "gpu-1"}, storage=False, at=at(2026, 10, 20), cause="t")
        usage_sync(order=order, nodes={}, storage=False, at=at(2026, 12, 10), cause="t")
        assert 720 * order.price_hourly > order.price_monthly  # the cap matters for this size
        costs = [order_cost(order, at=at(2026, m, d, 23, 59)).so_far
                 for m, d in ((10, 31), (11, 30), (12, 31))]
        assert costs[1] == order.price_monthly
        assert costs[0] == min(12 * 24 * order.price_hourly, order.price_monthly)
        assert costs[2] == min(9 * 24 * order.price_hourly, order.price_monthly)

    def test_forecast_runs_the_open_intervals_to_the_months_end(self, catalog, people):
        order = _active(people)
        usage_sync(order=order, nodes={1: "gpu-1"}, storage=False, at=at(2026, 3, 30), cause="t")
        cost = order_cost(order, at=at(2026, 3, 30, 10))
        assert cost.so_far == 10 * order.price_hourly
        assert cost.forecast == 48 * order.price_hourly
        assert cost.nodes[0].running


class TestStorage:
    def _with_bucket_line(self, people):
        order = make_order(people.acme, state=OrderState.ACTIVE, storage="minio", storage_tb=10)
        order.price_lines = [*order.price_lines, {"label": "Object storage 10 TB", "hourly": "0.27",
                                                  "monthly": "200.00"}]
        order.price_hourly += Decimal("0.27")
        order.price_monthly += Decimal("200.00")
        order.save()
        return order

    def test_retention_is_billed_until_the_bucket_is_deleted(self, catalog, people):
        order = self._with_bucket_line(people)
        order_meter(order=order, cause="hand-over", at=at(2026, 3, 1))
        storage = UsageInterval.objects.get(order=order, kind="storage")
        assert (storage.hourly, storage.monthly, storage.share) == (
            Decimal("0.27"), Decimal("200.00"), 1)
        Order.objects.filter(pk=order.pk).update(state=OrderState.TERMINATED)
        bucket = Bucket.objects.create(order=order, provider=order.storage_provider, name="b-1",
                                       managed=False, state=BucketState.RETAINED,
                                       retain_until=timezone.now() - timedelta(seconds=1))
        order_meter(order=order, cause="hand-back done")
        storage.refresh_from_db()
        assert storage.ended_at is None  # kept for its retention: still billed
        buckets_delete_expired()
        storage.refresh_from_db()
        bucket.refresh_from_db()
        assert bucket.state == BucketState.DELETED
        assert storage.ended_at is not None and storage.closed_by == "bucket deleted"

    def test_an_order_with_no_bucket_left_stops_at_termination(self, catalog, people):
        order = self._with_bucket_line(people)
        order_meter(order=order, cause="hand-over", at=at(2026, 3, 1))
        Order.objects.filter(pk=order.pk).update(state=OrderState.TERMINATED)
        order_meter(order=order, cause="hand-back done")
        assert not UsageInterval.objects.filter(order=order, ended_at=None).exists()

    def test_a_node_is_billed_its_line_without_the_storage(self, catalog, people):
        order = self._with_bucket_line(people)
        usage_sync(order=order, nodes={1: "gpu-1"}, storage=True, at=at(2026, 3, 1), cause="t")
        node = UsageInterval.objects.get(order=order, kind="node")
        assert node.hourly == order.price_hourly - Decimal("0.27")
        costs = usage_costs(organisation_id=people.acme.pk, at=at(2026, 3, 1, 2))
        assert costs[0].storage == Decimal("0.54") and costs[0].so_far == 2 * order.price_hourly


def test_sync_twice_changes_nothing(catalog, people):
    order = _active(people)
    for _ in range(2):
        usage_sync(order=order, nodes={1: "gpu-1"}, storage=False, at=at(2026, 3, 1), cause="t")
    assert UsageInterval.objects.filter(order=order).count() == 1


def test_an_outsiders_usage_is_not_in_an_organisations_costs(catalog, people):
    mine, theirs = _active(people), make_order(people.outsider_org, state=OrderState.ACTIVE)
    for order in (mine, theirs):
        usage_sync(order=order, nodes={1: "gpu-1"}, storage=False, at=at(2026, 3, 1), cause="t")
    assert [c.order_id for c in usage_costs(organisation_id=people.acme.pk, at=at(2026, 3, 2))] == [
        mine.pk]
