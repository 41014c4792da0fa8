import itertools
from decimal import Decimal

import pytest

_numbers = itertools.count(1)


def make_storage_order(**fields):
    """An order row with what the storage services read (reference, storage provider)."""
    from portal.catalog.models import NetworkOption, NvmeOption, ServerSKU
    from portal.orders.models import Order
    from tests.factories import OrganisationFactory

    sku = ServerSKU.objects.order_by("pk").first()
    return Order.objects.create(
        organisation=fields.pop("organisation", None) or OrganisationFactory(),
        sku=sku, nvme=NvmeOption.objects.order_by("pk").first(),
        network=NetworkOption.objects.order_by("pk").first(), price_hourly=Decimal("1.00"),
        price_monthly=Decimal("700.00"), **fields)


@pytest.fixture
def order(storage_provider):  # the fixtures of tests/provisioning/storage/s3server.py
    return make_storage_order(storage_provider=storage_provider, storage_tb=1)


class Lines(list):
    """A step log that remembers what was written (to scan for secrets)."""

    def __call__(self, line: str) -> None:
        self.append(line)


@pytest.fixture
def log():
    return Lines()
