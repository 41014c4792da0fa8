"""A sizing plan's figures are bounded where the plan enters (plan_check), and a plan stored
before the bounds existed shows as an unreadable plan on every page, never a 500."""

import json

import pytest
from django.test import Client
from rest_framework.test import APIClient

from portal.accounts.services import api_key_issue
from portal.orders.services import order_place
from portal.quotes.models import Quote
from portal.quotes.plans import plan_check, plan_readable
from portal.sizing.catalog_live import catalog_from_db
from portal.sizing.plan_tokens import plan_sign
from portal.sizing.recommend import Goal, SearchOptions, Workload, recommend
from provisioning.fulfilment.orders import order_submit
from tests.factories import SIZED_PLAN, make_quote, verified_login

HOSTILE_PLANS = [
    ({"model": "x", "nodes": 10**400}, "nodes must be between 1 and 1,024"),
    ({"model": "x", "headroom_bytes": -1}, "headroom_bytes must be between 0"),
    ({"model": "x", "nvme_tb": 1e308}, "nvme_tb must be between 0 and 10,000"),
    ({"model": "x", "mfu": 7}, "mfu must be between 0 and 1"),
    ({"model": "x", "memory_breakdown_bytes": {"weights": 10**30}}, "each memory_breakdown_bytes term"),
    ({"model": "x", "workload": {"deep": 10**40}}, "no figure may be larger"),
    ({"model": "x" * 70_000}, "at most 65,536 are accepted"),
    ({"model": "x", "workload": {"a": {"b": {"c": {"d": {"e": {"f": 1}}}}}}}, "nests deeper than 6"),
    # what the stack would deploy, refused when the quote is made rather than when the node is built
    ({"model": "x", "estimator_regime": {"training": {"lora_targets": "q_proj"}}},
     "lora_targets must be a list of layer names"),
    ({"model": "x", "estimator_regime": {"training": {"lora_dropout": 1.5}}},
     "lora_dropout must be a number from 0 to below 1, got 1.5"),
    ({"model": "x", "estimator_regime": {"training": {"lora_alpha": 8}}},
     "estimator_regime.training.lora_alpha is not an estimator knob"),
]


@pytest.mark.parametrize(("plan", "text"), HOSTILE_PLANS)
def test_plan_check_refuses_figures_out_of_range(plan, text):
    with pytest.raises(ValueError, match="In the sizing plan") as caught:
        plan_check(plan)
    assert text in str(caught.value)


def test_a_recommended_plan_and_an_older_unversioned_one_pass(catalog):
    work = Workload(model="llama-3.1-70b", dataset_tokens=10**10, seq_len=4096)
    plan = recommend(work, Goal("fastest"), catalog_from_db(), SearchOptions(top_n=1)).best.to_dict()
    assert plan_check(plan) == plan
    assert plan_check(SIZED_PLAN) == SIZED_PLAN


@pytest.mark.parametrize(("plan", "text"), HOSTILE_PLANS[:4])
def test_the_api_refuses_such_a_quote_on_the_plan_field(catalog, people, plan, text):
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION="Api-Key " + api_key_issue(
        organisation=people.acme, name="t").plaintext)
    body = json.dumps({"sku": "1x-l4-24gb", "plan": plan})
    response = client.post("/api/v1/quotes", body, content_type="application/json")
    assert response.status_code == 400
    assert text in response.json()["errors"]["plan"][0]
    assert not Quote.objects.exists()


def test_the_configurator_refuses_such_a_plan_on_the_plan_field(login, people, catalog):
    token = plan_sign({"model": "x", "nodes": 10**400})
    client = login(people.alice)
    response = client.post("/configure/", {"plan": token, "sku": "1x-l4-24gb", "node_count": 1})
    assert response.status_code in (200, 400)
    assert "nodes must be between 1 and 1,024" in response.content.decode()
    assert not Quote.objects.exists()


STORED_BAD = {"model": "broken", "sku": "8x-h100-sxm-80gb", "nodes": 10**400,
              "headroom_bytes": -(10**400), "per_gpu_total_bytes": 10**400, "nvme_tb": 1e308,
              "memory_breakdown_bytes": {"weights": 10**400}}


@pytest.fixture
def stored_bad_order(people, catalog, require_postgres):
    """An order whose quote was stored before plans were bounded (written past plan_check)."""
    quote = make_quote(people.acme, by=people.alice, plan=STORED_BAD)
    order = order_submit(order=order_place(quote=quote, by=people.alice), by=people.alice)
    Quote.objects.filter(pk=quote.pk).update(plan=STORED_BAD)
    type(order).objects.filter(pk=order.pk).update(plan=STORED_BAD)
    assert plan_readable(type(order).objects.get(pk=order.pk).plan) is None
    return order


def test_one_bad_stored_plan_does_not_take_the_approval_queue_down(stored_bad_order, people, catalog):
    good = make_quote(people.acme, by=people.alice, plan=SIZED_PLAN)
    order_submit(order=order_place(quote=good, by=people.alice), by=people.alice)
    client = Client(raise_request_exception=False)
    verified_login(client, people.sam)
    response = client.get("/ops/approvals/")
    assert response.status_code == 200
    html = response.content.decode()
    assert "Unreadable plan." in html and stored_bad_order.reference in html
    assert "Fits" in html  # the good order beside it is judged as before


@pytest.mark.parametrize("page", ["order", "quote", "reconfigure"])
def test_customer_pages_show_an_unreadable_plan(stored_bad_order, people, page):
    client = Client(raise_request_exception=False)
    client.force_login(people.alice)
    url = {"order": f"/orders/{stored_bad_order.reference}/",
           "quote": f"/configure/quotes/{stored_bad_order.quote.reference}/",
           "reconfigure": "/configure/?plan=" + plan_sign(STORED_BAD)}[page]
    response = client.get(url)
    assert response.status_code == 200
    html = response.content.decode()
    assert "Unreadable plan" in html or "must be between" in html
