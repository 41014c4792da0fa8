"""Server-rendered SVG charts: accessible, with the values as text, and escaped."""

import xml.etree.ElementTree as ET

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
    assert "61.2 GB of 80 GB" in texts and "#2 2 × 8× H100 SXM5 80GB" in texts
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
