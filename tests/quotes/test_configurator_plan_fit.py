"""The configurator tells the truth before the quote: with a sizing plan attached, a server the
plan's memory per GPU does not fit shows why at once and blocks the quote (the verdict the
order page gives), and every out-of-band message of the live summary has a target on the page."""

import re

import pytest

from portal.orders.selectors import plan_fit
from portal.quotes.models import Quote
from portal.sizing.plan_tokens import plan_sign
from tests.factories import OrganisationFactory, make_order, member_of

# A 70B full fine-tune sized for 8 × B200 with ZeRO-3: 152 GB per GPU (as the wizard attaches).
PLAN_70B = {"model": "llama-3.1-70b", "model_label": "Llama 3.1 70B", "finetune": "full",
            "sku": "8x-b200-sxm-180gb", "sku_name": "8× B200 SXM 180GB", "gpu": "b200-sxm-180gb",
            "gpu_name": "NVIDIA B200 (HGX, 1000W)", "gpus_per_node": 8, "nodes": 1,
            "strategy": "zero3", "tp": 1, "pp": 1, "micro_batch": 1, "grad_accum": 16,
            "per_gpu_total_bytes": 152_000_000_000, "gpu_memory_bytes": 180_000_000_000,
            "headroom_bytes": 28_000_000_000}
L4 = {"sku": "1x-l4-24gb", "node_count": "1", "nvme": "nvme-2tb-single", "network": "eth-1g",
      "storage_provider": "", "storage_tb": "0", "strategy": "", "tracker": ""}
DOES_NOT_FIT = "Does not fit: needs 152.0 GB per GPU, L4 has 24.0 GB."


@pytest.fixture
def alice(catalog):
    return member_of(OrganisationFactory(slug="acme"), username="alice")


def _params(**overrides):
    return L4 | {"plan": plan_sign(PLAN_70B)} | overrides


def test_a_server_the_plan_does_not_fit_says_why_at_once_and_blocks_the_quote(client, alice):
    client.force_login(alice)
    html = client.get("/configure/", _params()).content.decode()
    assert DOES_NOT_FIT in html
    assert re.search(r"Create quote</button>", html) and " disabled>Create quote" in html


def test_the_live_summary_carries_the_verdict_to_the_server_field(client, alice):
    client.force_login(alice)
    html = client.get("/configure/price/", _params(), HTTP_HX_REQUEST="true").content.decode()
    rules_sku = re.search(r'<div id="rules-sku"[^>]*hx-swap-oob="true">(.*?)</div>', html, re.S)
    assert rules_sku and DOES_NOT_FIT in rules_sku.group(1)
    assert " disabled>Create quote" in html


def test_posting_the_quote_anyway_is_refused_with_the_reason(client, alice):
    client.force_login(alice)
    response = client.post("/configure/", _params())
    assert response.status_code == 400 and DOES_NOT_FIT in response.content.decode()
    assert not Quote.objects.exists()


def test_a_server_with_enough_memory_per_gpu_quotes(client, alice):
    client.force_login(alice)
    response = client.post("/configure/", _params(sku="8x-b200-sxm-180gb", network="eth-100g"))
    assert response.status_code == 302 and Quote.objects.count() == 1
    html = client.get(response.url).content.decode()
    assert "Does not fit" not in html


def test_a_big_enough_gpu_of_another_server_is_still_blocked_by_memory(client, alice):
    client.force_login(alice)
    html = client.get("/configure/", _params(sku="8x-h200-sxm-141gb", network="eth-100g")
                      ).content.decode()
    assert "Does not fit: needs 152.0 GB per GPU, H200 SXM 141GB has 141.0 GB." in html


def test_another_node_count_is_a_warning_not_a_block(client, alice):
    client.force_login(alice)
    html = client.get("/configure/price/", _params(sku="8x-b200-sxm-180gb", network="eth-100g",
                                                   node_count="2"),
                      HTTP_HX_REQUEST="true").content.decode()
    assert "The plan needs 1 node, this has 2." in html
    assert " disabled>Create quote" not in html


def test_every_out_of_band_message_has_a_target_on_the_page(client, alice):
    """htmx logs a console error for an out-of-band swap without a target (#rules-plan had none)."""
    client.force_login(alice)
    page = client.get("/configure/", _params()).content.decode()
    partial = client.get("/configure/price/", _params(), HTTP_HX_REQUEST="true").content.decode()
    oob_ids = re.findall(r'id="([^"]+)"[^>]*hx-swap-oob="true"', partial)
    assert "rules-plan" in oob_ids and "rules-sku" in oob_ids
    for target in oob_ids:
        assert f'id="{target}"' in page, target


def test_the_order_page_and_the_configurator_give_one_verdict(catalog, people):
    order = make_order(people.acme, sku="1x-l4-24gb", plan=PLAN_70B)
    fit = plan_fit(order)
    assert (fit.fits, fit.memory_fits) == (False, False)
    assert f"Does not fit: {fit.summary}" == DOES_NOT_FIT
