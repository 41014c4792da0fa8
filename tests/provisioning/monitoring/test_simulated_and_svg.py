"""The simulated series (make run: no Prometheus, simulated nodes) and the SVG chart."""

from datetime import UTC, datetime, timedelta

from provisioning.monitoring.queries import METRICS
from provisioning.monitoring.selectors import busy_headline
from provisioning.monitoring.series import Chart, Series
from provisioning.monitoring.sources import NodeInfo, SimulatedSource
from provisioning.monitoring.svg import nice_max, node_chart_svg

END = datetime(2026, 12, 4, 12, 0, tzinfo=UTC)
START = END - timedelta(hours=1)


def _series(metric):
    return SimulatedSource().series(METRICS[metric], order_reference="TY-1", start=START, end=END,
                                    step_s=30, nodes=[NodeInfo("gpu-a", 8), NodeInfo("gpu-b", 2)])


def test_the_simulated_job_is_busy_with_checkpoint_dips_and_stable_between_calls():
    series = _series("gpu_util")
    assert [(s.node, s.gpu) for s in series][:3] == [("gpu-a", "0"), ("gpu-a", "1"), ("gpu-a", "2")]
    assert len(series) == 10 and all(len(s.points) == 121 for s in series)
    values = [v for s in series for _, v in s.points]
    assert 85 < sum(values) / len(values) < 98
    assert min(values) < 25  # a checkpoint in the hour
    assert series == _series("gpu_util")  # a refresh does not redraw the past


def test_simulated_temperature_and_power_follow_the_load_and_xids_are_none():
    temperature = [v for s in _series("temperature") for _, v in s.points]
    power = [v for s in _series("power") for _, v in s.points]
    assert 40 <= min(temperature) and max(temperature) < 85
    assert 150 < min(power) and max(power) < 700
    assert {v for s in _series("xid") for _, v in s.points} == {0.0}


def _chart(series, metric="gpu_util", max_value=100.0):
    return Chart(metric=metric, label="GPU utilisation", unit="%", range="1h", range_label="1 hour",
                 start=START, end=END, step_s=30, max_value=max_value, series=tuple(series),
                 nodes=("gpu-a",))


def test_the_headline_is_the_mean_utilisation_over_the_window():
    chart = _chart([Series("gpu-a", "0", ((START.timestamp(), 90.0), (END.timestamp(), 98.0)))])
    assert busy_headline(chart) == "GPU busy 94 % over the last hour"
    assert busy_headline(_chart([])) == ""


def test_the_svg_draws_a_line_per_gpu_of_the_node_and_escapes_labels():
    series = [Series("gpu-a", "0", ((START.timestamp(), 10.0), (END.timestamp(), 50.0))),
              Series("gpu-a", "<1>", ((START.timestamp(), 20.0), (END.timestamp(), 60.0))),
              Series("gpu-b", "0", ((START.timestamp(), 30.0), (END.timestamp(), 70.0)))]
    svg = node_chart_svg(_chart(series), "gpu-a", chart_id="c1")
    assert svg.count("<polyline") == 2 and "&lt;1&gt;" in svg and "<1>" not in svg
    assert "lowest 10 %, highest 60 %, mean 35 %" in svg
    # The plot spans y 190 (0 %) to 12 (100 %), x 48 (start) to 592 (end): 10 % → 172.2.
    assert 'points="48.0,172.2 592.0,101.0"' in svg


def test_an_empty_window_says_so():
    assert "No data in this window yet" in node_chart_svg(_chart([]), "gpu-a", chart_id="c")


def test_the_axis_top_is_a_round_number():
    assert [nice_max(v) for v in (0, 0.7, 3, 71.5, 640, 1001)] == [1, 1, 5, 100, 1000, 2000]


def test_a_week_of_simulated_points_shows_the_load_not_single_checkpoint_samples():
    week = SimulatedSource().series(METRICS["gpu_util"], order_reference="TY-1",
                                    start=END - timedelta(days=7), end=END, step_s=5040,
                                    nodes=[NodeInfo("gpu-a", 1)])
    values = [v for _, v in week[0].points]
    assert 80 < min(values) and max(values) < 95


def test_axis_numbers_of_a_thousand_and_more_are_short():
    svg = node_chart_svg(_chart([Series("gpu-a", "0", ((START.timestamp(), 700.0),))],
                                metric="power", max_value=None), "gpu-a", chart_id="p")
    assert ">1k</text>" in svg and ">750</text>" in svg
