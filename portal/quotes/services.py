"""Quotes: a configuration, the sizing plan it came from and its price, frozen for N days."""

from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from portal.quotes.configuration import Configuration
from portal.quotes.models import QUOTE_VALID_DAYS, Quote
from portal.quotes.plans import plan_check, plan_nvme_tb
from portal.quotes.rules import Evaluation, Message, evaluate, stack_message
from portal.quotes.selectors import sku_stock, strategy_stacks
from portal.sizing.catalog_live import price_list_for


class ConfigurationError(ValueError):
    """The configuration breaks a rule; `problems` holds the messages (by form field)."""

    def __init__(self, problems: tuple[Message, ...]):
        self.problems = problems
        super().__init__(" ".join(p.text for p in problems))


def storage_fields(configuration: Configuration, *, keeps_storage: bool = True) -> dict:
    """The quote's retention and (custom kind only) the customer's endpoint, bucket and keys."""
    fields = {"storage_retention_days": configuration.storage_retention_days
              or settings.STORAGE_RETENTION_DAYS}
    custom = configuration.custom_storage
    if keeps_storage and configuration.storage_kind == "custom" and custom is not None:
        fields |= {"storage_endpoint_url": custom.endpoint_url, "storage_bucket": custom.bucket,
                   "storage_access_key_id": custom.access_key_id,
                   "storage_secret_key": custom.secret_key}
    return fields


def configuration_evaluate(configuration: Configuration, *, plan: dict | None = None,
                           organisation=None) -> Evaluation:
    """The rules and the price as ``organisation`` pays it (its or its reseller's price list;
    None: list prices)."""
    return evaluate(configuration, recommended_nvme_tb=plan_nvme_tb(plan or {}) or None,
                    stock=sku_stock(configuration.sku), plan=plan, stacks=strategy_stacks(),
                    price_list=price_list_for(organisation))


def quote_stack_problem(quote: Quote) -> str:
    """Why the quote's training stack cannot run its plan ("" when it can); for quotes stored
    before stacks declared capabilities."""
    message = stack_message(quote.strategy, quote.plan, strategy_stacks())
    return message.text if message else ""


@transaction.atomic
def quote_create(*, organisation, by, configuration: Configuration,
                 plan: dict | None = None, valid_days: int = QUOTE_VALID_DAYS) -> Quote:
    """Price `configuration` now, as `organisation` pays, and freeze it; raises
    ConfigurationError when a rule fails."""
    plan = plan_check(plan)
    evaluation = configuration_evaluate(configuration, plan=plan, organisation=organisation)
    if not evaluation.ok:
        raise ConfigurationError(evaluation.errors)
    price = evaluation.price
    keeps_storage = configuration.has_object_storage
    return Quote.objects.create(
        organisation=organisation,
        created_by=by if getattr(by, "pk", None) else None,
        sku=configuration.sku,
        node_count=configuration.node_count,
        nvme=configuration.nvme,
        network=configuration.network,
        storage_provider=configuration.storage_provider if keeps_storage else None,
        storage_tb=configuration.storage_tb if configuration.storage_provider else 0,
        **storage_fields(configuration, keeps_storage=keeps_storage),
        strategy=configuration.strategy,
        tracker=configuration.tracker,
        plan=plan,
        price_lines=[line.to_dict() for line in price.lines],
        price_hourly=price.hourly,
        price_monthly=price.monthly,
        valid_until=timezone.now() + timedelta(days=valid_days),
    )
