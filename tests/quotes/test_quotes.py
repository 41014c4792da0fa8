"""quote_create and the quote page (/configure/quotes/<reference>/)."""

from datetime import timedelta
from decimal import Decimal

import pytest
from django.utils import timezone

from portal.catalog.models import NetworkOption, NvmeOption, ServerSKU, StackOption, StorageProvider
from portal.quotes.configuration import Configuration
from portal.quotes.models import Quote
from portal.quotes.services import ConfigurationError, quote_create
from portal.sizing.plan_tokens import plan_sign, plan_unsign
from tests.factories import OrganisationFactory, member_of


def configuration(**kw):
    base = dict(sku=ServerSKU.objects.get(slug="8x-h100-sxm-80gb"),
                nvme=NvmeOption.objects.get(slug="nvme-4tb-raid0"),
                network=NetworkOption.objects.get(slug="ib-ndr-400g"), node_count=2,
                storage_provider=StorageProvider.objects.get(slug="minio"), storage_tb=3,
                strategy=StackOption.objects.get(slug="fsdp"), tracker=StackOption.objects.get(slug="wandb"))
    return Configuration(**(base | kw))


@pytest.fixture
def acme(catalog):
    return OrganisationFactory(slug="acme", name="Acme AI")


@pytest.fixture
def quote(acme):
    return quote_create(organisation=acme, by=member_of(acme), configuration=configuration(),
                        plan={"model": "llama-3.1-8b", "nodes": 2, "train_hours": 30.0, "nvme_tb": 3.2,
                              "gpus_per_node": 8, "gpu_name": "NVIDIA H100 SXM5 80GB", "strategy": "fsdp",
                              "micro_batch": 1, "grad_accum": 8, "tp": 1, "pp": 1})


def test_quote_create_freezes_config_plan_and_price(quote):
    assert quote.reference.startswith("Q-")
    assert quote.node_count == 2 and quote.storage_tb == 3
    assert quote.plan["model"] == "llama-3.1-8b"
    assert quote.price_monthly == Decimal("14643.80") * 2 + 224 + 4400 + 45
    assert [line["label"] for line in quote.price_lines][-1] == "Object storage 3 TB (On-site MinIO)"
    assert timedelta(days=13) < quote.valid_until - timezone.now() <= timedelta(days=14)


def test_quote_create_refuses_a_broken_rule(acme):
    with pytest.raises(ConfigurationError, match="single-node orders only") as exc:
        quote_create(organisation=acme, by=None, plan={},
                     configuration=configuration(network=NetworkOption.objects.get(slug="eth-1g")))
    assert exc.value.problems[0].field == "network"
    assert not Quote.objects.exists()


def test_quote_validity_is_configurable(acme):
    quote = quote_create(organisation=acme, by=None, configuration=configuration(), plan={}, valid_days=3)
    assert quote.valid_until - timezone.now() < timedelta(days=3, minutes=1)


def test_plan_tokens_round_trip_and_refuse_tampering():
    token = plan_sign({"sku": "x", "nodes": 2})
    assert plan_unsign(token) == {"sku": "x", "nodes": 2}
    with pytest.raises(ValueError, match="damaged"):
        plan_unsign(token[:-2] + "zz")


def test_a_member_sees_the_quote_with_a_place_order_button(client, quote, acme):
    client.force_login(member_of(acme))
    html = client.get(f"/configure/quotes/{quote.reference}/").content.decode()
    assert f"Quote {quote.reference}" in html
    assert f'action="/orders/place/{quote.reference}/"' in html
    assert "Place order" in html
    assert "InfiniBand NDR 400 Gb/s" in html and "3 TB on On-site MinIO" in html
    assert "Sizing plan" in html and "30.0 h" in html
    assert "$33,956.60" in html  # per month, with units


def test_an_outsider_gets_404(client, quote):
    client.force_login(member_of(OrganisationFactory()))
    assert client.get(f"/configure/quotes/{quote.reference}/").status_code == 404


def test_an_unknown_reference_is_404(client, acme):
    client.force_login(member_of(acme))
    assert client.get("/configure/quotes/Q-NOPE/").status_code == 404


def test_anonymous_users_are_sent_to_login(client, quote):
    response = client.get(f"/configure/quotes/{quote.reference}/")
    assert response.status_code == 302 and response["Location"].startswith("/accounts/login/")


def test_an_expired_quote_offers_a_fresh_one(client, quote, acme):
    Quote.objects.filter(pk=quote.pk).update(valid_until=timezone.now() - timedelta(days=1))
    client.force_login(member_of(acme))
    html = client.get(f"/configure/quotes/{quote.reference}/").content.decode()
    assert "expired" in html and "Configure again" in html
    assert "/orders/place/" not in html
    assert "sku=8x-h100-sxm-80gb" in html and "plan=" in html
