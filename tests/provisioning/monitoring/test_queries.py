"""The chart queries: allow-listed metrics and ranges, the order label as the only matcher, its
value escaped so no reference can widen the selection."""

import pytest

from provisioning.monitoring.queries import (
    METRICS,
    label_value,
    metric_for,
    order_query,
    range_for,
    step_for,
)


def test_every_query_selects_on_the_order_label_only():
    for metric in METRICS.values():
        query = order_query(metric, order_reference="TY-0001", step_s=30)
        assert query.count('{order="TY-0001"}') == 1, query
        assert "{selector}" not in query and "{step}" not in query


def test_a_reference_cannot_break_out_of_its_label_value():
    hostile = 'TY-1"} or DCGM_FI_DEV_GPU_UTIL{order=~".*'
    query = order_query(METRICS["gpu_util"], order_reference=hostile, step_s=30)
    assert query == ('max by (node, gpu) (avg_over_time(DCGM_FI_DEV_GPU_UTIL{order="TY-1\\"} or '
                     'DCGM_FI_DEV_GPU_UTIL{order=~\\".*"}[30s]))')
    assert label_value('a\\b\n"c') == '"a\\\\b\\n\\"c"'


def test_the_xid_query_counts_changes_over_the_step():
    query = order_query(METRICS["xid"], order_reference="TY-2", step_s=120)
    assert query == 'sum by (node, gpu) (changes(DCGM_FI_DEV_XID_ERRORS{order="TY-2"}[120s]))'


@pytest.mark.parametrize("bad", ["up", "DCGM_FI_DEV_GPU_UTIL", "", "gpu_util{}"])
def test_metrics_outside_the_allow_list_are_refused(bad):
    with pytest.raises(ValueError, match="Unknown metric"):
        metric_for(bad)


def test_ranges_outside_the_allow_list_are_refused():
    assert range_for("7d").seconds == 7 * 86400
    with pytest.raises(ValueError, match="choose one of 1h, 24h, 7d, life"):
        range_for("30d")


def test_an_empty_reference_is_refused():
    with pytest.raises(ValueError):
        order_query(METRICS["power"], order_reference="", step_s=30)


def test_the_step_gives_about_120_points_and_never_less_than_15_s():
    assert step_for(3600) == 30
    assert step_for(7 * 86400) == 5040
    assert step_for(60) == 15
