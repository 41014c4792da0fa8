"""In real Chromium at 390 and 1280 px: the sizing charts' labels are readable (at least 10 px on
screen) and none overlaps another, on a job whose cost runs into millions of dollars."""

import pytest

from tests.conftest import PAGE_TIMEOUT_MS

# 70B pre-training on 200B tokens: job costs from about $100k to several $M across the catalog.
QUERY = ("preset=llama-3.1-70b&model_source=preset&finetune=full&precision=bf16-mixed&seq_len=4096"
         "&global_batch_seqs=1024&optimizer=adamw&dataset_tokens=200B&dataset_files=1000&epochs=1"
         "&goal=budget&budget_usd=1000&max_nodes=32&lora_rank=16&go=results")
VISIBLE_LABELS = """(sel) => [...document.querySelectorAll(sel)].filter(t =>
    getComputedStyle(t).display !== 'none').map(t => {
    const r = t.getBoundingClientRect();
    return {text: t.textContent, x0: r.left, x1: r.right, y0: r.top, y1: r.bottom, h: r.height};
})"""


def _overlaps(boxes):
    return [(a["text"], b["text"]) for i, a in enumerate(boxes) for b in boxes[i + 1:]
            if a["x0"] < b["x1"] - 0.5 and b["x0"] < a["x1"] - 0.5
            and a["y0"] < b["y1"] - 0.5 and b["y0"] < a["y1"] - 0.5]


@pytest.mark.browser
@pytest.mark.parametrize("width", (390, 1280))
def test_chart_labels_are_readable_and_apart(live_server, browser, catalog, width, tmp_path):
    context = browser.new_context(viewport={"width": width, "height": 900})
    page = context.new_page()
    page.set_default_timeout(PAGE_TIMEOUT_MS)
    page.goto(f"{live_server.url}/sizing/?{QUERY}")
    page.locator("#cost-chart").scroll_into_view_if_needed()
    page.locator("#cost-chart").screenshot(path=str(tmp_path / f"cost-chart-{width}.png"))
    page.locator("#memory-chart").screenshot(path=str(tmp_path / f"memory-chart-{width}.png"))
    page.screenshot(path=str(tmp_path / f"results-{width}.png"), full_page=True)
    ticks = page.evaluate(VISIBLE_LABELS, "#cost-chart text.tick")
    money = [t["text"] for t in ticks if t["text"].startswith("$")]
    assert len(money) >= 3 and any(t.endswith(("k", "M")) for t in money), money
    assert not any("," in t for t in money), money
    for selector in ("#cost-chart text", "#memory-chart text"):
        labels = page.evaluate(VISIBLE_LABELS, selector)
        small = [(t["text"], round(t["h"], 1)) for t in labels if t["h"] < 10]
        assert not small, f"{selector} at {width}px: {small}"
        assert not _overlaps(labels), f"{selector} at {width}px: {_overlaps(labels)}"
    assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")
    context.close()
