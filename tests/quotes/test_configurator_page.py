"""The configurator page (/configure/) and its live price partial."""

from urllib.parse import parse_qs, urlparse

import pytest

from portal.quotes.models import Quote
from portal.sizing.plan_tokens import plan_sign
from tests.factories import OrganisationFactory, UserFactory, member_of

PLAN = {"model": "llama-3.1-8b", "finetune": "full", "precision": "bf16-mixed",
        "sku": "8x-h100-sxm-80gb", "gpu": "h100-sxm-80gb", "gpu_name": "NVIDIA H100 SXM5 80GB",
        "gpus_per_node": 8, "nodes": 2, "network": "ib-ndr-400g", "strategy": "zero3", "tp": 1, "pp": 1,
        "micro_batch": 2, "grad_accum": 4, "checkpointing": "none", "per_gpu_total_bytes": 61_200_000_000,
        "gpu_memory_bytes": 80_000_000_000, "tokens_per_second": 101_000.0, "train_hours": 12.5,
        "price_total_usd": 590.0, "nvme_option": "nvme-4tb-raid0", "nvme_tb": 3.2, "raid": "raid0",
        "storage_provider": "minio", "storage_tb": 2.4, "stack": "deepspeed"}

GOOD = {"sku": "1x-h100-pcie-80gb", "node_count": "1", "nvme": "nvme-2tb-single", "network": "eth-1g",
        "storage_provider": "", "storage_tb": "0", "strategy": "ddp", "tracker": "mlflow"}


@pytest.fixture
def alice(catalog):
    return member_of(OrganisationFactory(slug="acme"), username="alice")


def test_it_renders_with_defaults_and_a_price(client, catalog):
    html = client.get("/configure/").content.decode()
    assert "Configure your server" in html
    assert 'id="price-hourly"' in html and "per month" in html
    assert "Log in to get a quote" in html


def test_query_parameters_preselect_the_configuration(client, catalog):
    html = client.get("/configure/", GOOD).content.decode()
    assert 'value="1x-h100-pcie-80gb" selected' in html
    assert "$2.35" in html  # the SKU line
    assert "NVMe 2 TB, Single drive" in html


def test_the_price_partial_follows_the_nvme_size(client, catalog):
    small = client.get("/configure/price/", GOOD, HTTP_HX_REQUEST="true")
    large = client.get("/configure/price/", GOOD | {"nvme": "nvme-10tb-raid10"}, HTTP_HX_REQUEST="true")
    assert small.status_code == large.status_code == 200
    assert "<html" not in small.content.decode()
    assert "$1,514.17" in small.content.decode()  # $1,458.17 server + $56 NVMe
    assert "$2,018.17" in large.content.decode()
    assert "nvme=nvme-10tb-raid10" in large["HX-Replace-Url"]


def test_one_gigabit_for_two_nodes_is_an_inline_error(client, alice):
    client.force_login(alice)
    response = client.get("/configure/price/", GOOD | {"node_count": "2"}, HTTP_HX_REQUEST="true")
    html = response.content.decode()
    assert 'id="rules-network" class="rule-messages" hx-swap-oob="true"' in html
    assert "single-node orders only" in html
    assert "Create quote</button>" in html and " disabled>" in html  # no quote while a rule fails


def test_bad_numbers_get_an_inline_message_not_a_500(client, catalog):
    response = client.get("/configure/", GOOD | {"node_count": "lots", "storage_tb": "-3"})
    assert response.status_code == 200
    html = response.content.decode()
    assert "Enter a whole number." in html
    assert "Ensure this value is greater than or equal to 0." in html
    assert "Fix the highlighted fields to see a price." in html


def test_unknown_sku_is_an_inline_error(client, catalog):
    html = client.get("/configure/", GOOD | {"sku": "nope"}).content.decode()
    assert "Select a valid choice" in html


def test_a_plan_prefills_the_form(client, catalog):
    html = client.get("/configure/", {"plan": plan_sign(PLAN)}).content.decode()
    assert 'value="8x-h100-sxm-80gb" selected' in html
    assert 'value="2"' in html  # nodes
    assert 'value="ib-ndr-400g" selected' in html
    assert 'value="nvme-4tb-raid0" selected' in html
    assert 'value="deepspeed" selected' in html
    assert 'name="storage_tb" value="3"' in html
    assert "From your sizing" in html and "12.5 h" in html


def test_nvme_below_the_plan_warns(client, catalog):
    html = client.get("/configure/", {"plan": plan_sign(PLAN), "nvme": "nvme-1tb-single"}).content.decode()
    assert "below the 3.2 TB recommended" in html


def test_a_tampered_plan_is_an_inline_error(client, catalog):
    html = client.get("/configure/", GOOD | {"plan": plan_sign(PLAN)[:-3] + "abc"}).content.decode()
    assert "The sizing plan link is damaged" in html


def test_anonymous_quote_goes_to_login_and_back_with_the_configuration(client, catalog):
    response = client.post("/configure/", GOOD)
    assert response.status_code == 302
    target = urlparse(response["Location"])
    assert target.path == "/accounts/login/"
    back = urlparse(parse_qs(target.query)["next"][0])
    assert back.path == "/configure/"
    assert parse_qs(back.query)["sku"] == ["1x-h100-pcie-80gb"]
    assert not Quote.objects.exists()


def test_a_member_creates_a_quote_with_the_plan(client, alice):
    client.force_login(alice)
    response = client.post("/configure/", GOOD | {"plan": plan_sign(PLAN), "sku": "8x-h100-sxm-80gb",
                                                  "node_count": "2", "network": "ib-ndr-400g",
                                                  "strategy": "deepspeed"})
    quote = Quote.objects.get()
    assert response.status_code == 302
    assert response["Location"] == f"/configure/quotes/{quote.reference}/"
    assert quote.organisation.slug == "acme" and quote.created_by == alice
    assert quote.node_count == 2 and quote.plan["strategy"] == "zero3"
    assert quote.price_lines[0]["label"].endswith("× 2 nodes")
    assert quote.valid_until > quote.created_at


def test_a_broken_rule_blocks_the_quote_with_an_inline_message(client, alice):
    client.force_login(alice)
    response = client.post("/configure/", GOOD | {"node_count": "3"})
    assert response.status_code == 400
    assert "single-node orders only" in response.content.decode()
    assert not Quote.objects.exists()


def test_a_login_without_organisation_is_told_why(client, catalog):
    client.force_login(UserFactory())
    response = client.post("/configure/", GOOD)
    assert response.status_code == 400
    assert "does not belong to an organisation" in response.content.decode()


def test_a_reseller_admin_picks_the_organisation(client, catalog):
    from portal.accounts.models import Membership
    from tests.factories import MembershipFactory

    reseller = OrganisationFactory(slug="resell", kind="reseller")
    child = OrganisationFactory(slug="child", parent=reseller)
    rita = UserFactory()
    MembershipFactory(user=rita, organisation=reseller, role=Membership.Role.RESELLER_ADMIN)
    client.force_login(rita)
    assert 'name="organisation"' in client.get("/configure/").content.decode()
    client.post("/configure/", GOOD | {"organisation": "child"})
    assert Quote.objects.get().organisation == child
    response = client.post("/configure/", GOOD | {"organisation": "someone-else"})
    assert response.status_code == 400


@pytest.mark.parametrize("plan", [
    {"workload": "llama"},  # stored before plan_check refused it, or by an older release
    {"workload": {"model_source": "preset", "model": "mistral-7b", "global_batch_tokens": "a", "seq_len": 4}},
    {"network": {"slug": "fabric", "speed_gbps": "fast"}},
])
def test_a_stored_plan_with_odd_values_still_renders(client, catalog, plan):
    # "Change the configuration" on a quote page signs whatever plan the quote holds.
    response = client.get("/configure/", {"plan": plan_sign(plan)})
    assert response.status_code == 200
    assert "Configure your server" in response.content.decode()


TP_PLAN = PLAN | {"strategy": "fsdp", "sharding": "fsdp-full-shard", "offload": "none", "tp": 4, "pp": 2,
                  "stack": "torchtitan"}


def test_a_stack_that_cannot_run_the_plan_is_an_inline_error_naming_one_that_can(client, alice):
    client.force_login(alice)
    form = GOOD | {"plan": plan_sign(TP_PLAN), "sku": "8x-h100-sxm-80gb", "node_count": "2",
                   "network": "ib-ndr-400g", "strategy": "deepspeed"}
    response = client.post("/configure/", form)
    assert response.status_code == 400
    html = response.content.decode()
    assert ("DeepSpeed (ZeRO stage 1–3) cannot run FSDP2 full shard, tensor parallelism 4 and pipeline "
            "parallelism 2 of this plan: choose torchtitan (FSDP2 + TP + PP + CP).") in html
    assert not Quote.objects.exists()
    response = client.post("/configure/", form | {"strategy": "torchtitan"})
    assert response.status_code == 302
    assert Quote.objects.get().strategy.slug == "torchtitan"


def test_the_live_price_partial_shows_the_stack_error(client, alice):
    client.force_login(alice)
    html = client.get("/configure/", GOOD | {"plan": plan_sign(TP_PLAN), "strategy": "ddp"}).content.decode()
    assert "PyTorch DDP (torchrun) cannot run FSDP2 full shard, tensor parallelism 4 and pipeline" in html
