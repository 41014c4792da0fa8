"""Server-rendered SVG charts: accessible, with the values as text, and escaped."""

import xml.etree.ElementTree as ET

import pytest

from portal.sizing import charts

SVG = "{http://www.w3.org/2000/svg}"


def plan(**kw):
    base = {"gpu_name": "NVIDIA H100 SXM5 80GB", "gpus_per_node": 8, "nodes": 1,
            "gpu_memory_bytes": 80 * 10**9, "usable_memory_bytes": 76 * 10**9,
            "per_gpu_total_bytes": 61_200_000_000, "train_hours": 12.5, "price_total_usd": 590.0,
            "memory_breakdown_bytes": {"weights": 2 * 10**9, "gradients": 2 * 10**9,
                                       "optimizer_states": 12 * 10**9, "activations": 40 * 10**9,
                                       "framework_overhead": 5_200_000_000, "gathered_buffers": 0}}
    return base | kw


def parse(svg: str):
    return ET.fromstring(svg)


def test_memory_chart_is_accessible_and_states_the_values():
    svg = charts.memory_chart([plan(), plan(nodes=2, per_gpu_total_bytes=30 * 10**9)])
    root = parse(svg)
    assert root.get("role") == "img"
    assert root.find(f"{SVG}title").text == "Memory per GPU for each plan"
    desc = root.find(f"{SVG}desc").text
    assert "#1 8× H100 SXM5 80GB: 61.2 GB of 80.0 GB per GPU" in desc
    assert "Activations 40.0 GB" in desc
    texts = [t.text for t in root.iter(f"{SVG}text")]
    assert "61.2 GB of 80 GB" in texts and "#2 2 nodes of 8× H100 SXM5 80GB" in texts
    assert len(root.findall(f"{SVG}g")) == 2
    titles = [t.text for t in root.iter(f"{SVG}title")]
    assert "Optimizer states: 12.0 GB" in titles and "Capacity: 80.0 GB" in titles
    assert not any(t and t.startswith("Gathered buffers") for t in titles)  # zero terms are not drawn


def test_memory_parts_keep_unknown_terms():
    parts = charts.memory_parts(plan(memory_breakdown_bytes={"weights": 1, "kv_cache": 5}))
    assert [p[1] for p in parts] == ["Weights", "Kv cache"]
    assert charts.memory_legend([plan()])[0] == ("Weights", "#2457d6")


def test_cost_time_chart_marks_the_pareto_front_and_the_plans():
    rows = [(1, 900, True), (2, 500, True), (10, 300, True), (5, 800, False), (40, 700, False)]
    points = [{"sku": "a", "nodes": 1, "strategy": "ddp", "train_hours": h, "price_total_usd": c, "pareto": p}
              for h, c, p in rows]
    svg = charts.cost_time_chart(points, [plan(train_hours=2, price_total_usd=500)])
    root = parse(svg)
    assert "5 feasible configurations" in root.find(f"{SVG}title").text
    assert "3 are on the Pareto front" in root.find(f"{SVG}desc").text
    pareto = root.find(f"{SVG}g[@class='pareto']")
    assert len(pareto.findall(f"{SVG}circle")) == 3
    assert root.find(f"{SVG}polyline[@class='pareto-line']") is not None
    assert [t.text for t in root.find(f"{SVG}g[@class='plans']").iter(f"{SVG}text")] == ["#1"]
    ticks = [t.text for t in root.iter(f"{SVG}text") if t.get("class") == "tick"]
    assert "Training time (log scale)" in svg and "1 h" in ticks and "1 day" in ticks


def test_linear_axes_for_narrow_ranges():
    points = [{"sku": "a", "train_hours": h, "price_total_usd": 100 + h, "pareto": False} for h in (2, 3, 4)]
    svg = charts.cost_time_chart(points, [])
    assert "(log scale)" not in svg
    assert ">$102</text>" in svg and ">3.0 h</text>" in svg


def test_labels_are_escaped():
    svg = charts.memory_chart([plan(gpu_name="<script>alert(1)</script>")])
    assert "<script>" not in svg and "&lt;script&gt;" in svg
    parse(svg)


def test_no_data_no_chart():
    assert charts.memory_chart([]) == "" and charts.cost_time_chart([], []) == ""


# --- axes: money in $k / $M, several ticks, one scale rule, no overlapping labels -------------
def _ticks(svg):
    root = parse(svg)
    return [t.text for t in root.iter(f"{SVG}text") if (t.get("class") or "").startswith("tick")]


def _cost_points(costs, hours=None):
    hours = hours or [10 + i for i in range(len(costs))]
    return [{"sku": "a", "train_hours": h, "price_total_usd": c, "pareto": False}
            for h, c in zip(hours, costs, strict=True)]


def test_a_million_dollar_axis_reads_in_millions_with_several_ticks():
    svg = charts.cost_time_chart(_cost_points([800_000, 1_200_000, 1_600_000]), [])
    ticks = _ticks(svg)
    money = [t for t in ticks if t.startswith("$")]
    assert len(money) >= 3, money
    assert all(t.endswith(("M", "k")) for t in money) and "$1.2M" in money
    assert not any("," in t for t in money)  # never "$1,200k"


def test_thousands_read_in_k_and_small_sums_in_dollars():
    from portal.core.units import usd_compact
    assert [usd_compact(v) for v in (0, 4.2, 590, 1500, 12_000, 999_999, 1_200_000)] == [
        "$0", "$4.20", "$590", "$1.5k", "$12k", "$1M", "$1.2M"]


def test_both_axes_follow_one_rule_log_only_when_wide():
    narrow = charts.cost_time_chart(_cost_points([100, 150, 180], hours=[2, 3, 4]), [])
    wide = charts.cost_time_chart(_cost_points([100, 5_000, 90_000], hours=[1, 30, 900]), [])
    assert "log scale" not in narrow
    assert "Training time (log scale)" in wide and "Job cost (USD, log scale)" in wide
    assert charts.axis([1, 2, 21], unit="usd").log and not charts.axis([1, 2, 20], unit="usd").log


@pytest.mark.parametrize("values", [[1, 1.05], [0.9, 2.1], [100, 180], [1e3, 1e9], [0.5, 40]])
def test_every_axis_has_several_but_not_too_many_ticks(values):
    ticks = charts.axis(values, unit="usd").ticks
    assert 3 <= len(ticks) <= charts.MAX_TICKS, ticks


def test_tick_labels_do_not_overlap():
    hours = [0.2, 0.5, 1, 2, 5, 12, 24, 48, 100, 170, 400, 800, 2000]
    svg = charts.cost_time_chart(_cost_points([50 * h for h in hours], hours=hours), [])
    root = parse(svg)
    x_labels = [(float(t.get("x")), t.text) for t in root.iter(f"{SVG}text")
                if (t.get("class") or "").startswith("tick") and t.get("text-anchor") == "middle"]
    for (x1, a), (x2, b) in zip(x_labels, x_labels[1:], strict=False):
        assert x2 - x1 >= (len(a) + len(b)) * charts.CHAR_WIDTH * 13 / 2, (a, b)


def test_plan_numbers_next_to_each_other_do_not_overlap():
    plans = [plan(train_hours=10 + i * 0.05, price_total_usd=500 + i) for i in range(5)]
    svg = charts.cost_time_chart(_cost_points([400, 600], hours=[5, 20]), plans)
    root = parse(svg)
    labels = [(float(t.get("x")), float(t.get("y")), t.get("text-anchor"), t.text)
              for t in root.find(f"{SVG}g[@class='plans']").iter(f"{SVG}text")]
    assert [t[3] for t in labels] == ["#1", "#2", "#3", "#4", "#5"]
    boxes = []
    for x, y, anchor, text in labels:
        w = len(text) * charts.CHAR_WIDTH * 18  # the phone-width font, the larger one
        x0 = x if anchor == "start" else x - w if anchor == "end" else x - w / 2
        boxes.append((x0, y - 18, x0 + w, y))
    for i, a in enumerate(boxes):
        for b in boxes[i + 1:]:
            assert a[2] <= b[0] or b[2] <= a[0] or a[3] <= b[1] or b[3] <= a[1], (a, b)


def test_the_first_time_label_and_the_lowest_cost_label_never_meet_in_the_corner():
    left, axis_y = 80, 334
    x_ticks = [(168, "1 week", 95.0), (720, "1 month", 300.0), (2160, "3 months", 500.0)]
    y_ticks = [(1e5, "$100k", 331.0), (1e6, "$1M", 200.0), (1e7, "$10M", 60.0)]
    # "1 week" centred at 95 reaches left of the axis, "$100k" sits on the bottom axis: they clash
    xs, ys = charts._clear_corner(x_ticks, y_ticks, left=left, axis_y=axis_y)
    assert xs == x_ticks[1:] and ys == y_ticks  # equal counts: the time label gives way
    xs, ys = charts._clear_corner(x_ticks, [*y_ticks, (1e8, "$100M", 20.0)], left=left, axis_y=axis_y)
    assert xs == x_ticks and ys[0] == y_ticks[1]  # more cost labels: the lowest gives way
    apart = [(1e5, "$100k", 250.0), *y_ticks[1:]]  # well above the time labels
    assert charts._clear_corner(x_ticks, apart, left=left, axis_y=axis_y) == (x_ticks, apart)
    two = x_ticks[:2]  # an axis keeps at least two labels
    assert charts._clear_corner(two, y_ticks[:2], left=left, axis_y=axis_y) == (two, y_ticks[:2])
