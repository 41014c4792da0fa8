"""Configurator rules: pure Python, no database access (the custom S3 endpoint's check may
resolve its name: ``portal.core.addresses``). Each rule gives a message a customer can act on;
errors block a quote."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from portal.catalog.pricing import Price, PriceList
from portal.core.addresses import url_problem
from portal.core.units import tb
from portal.quotes.configuration import Configuration, CustomStorage
from portal.quotes.fit import plan_fit_verdict
from portal.quotes.pricing import price
from portal.sizing.recommend.stacks import Needs, stack_problem

MIN_MULTI_NODE_ETHERNET_GBPS = 100
MAX_NODES = 32
MAX_STORAGE_TB = 1000
MIN_RETENTION_DAYS, MAX_RETENTION_DAYS = 1, 365

ERROR, WARNING, INFO = "error", "warning", "info"


@dataclass(frozen=True)
class Message:
    level: str  # error (blocks a quote), warning, info
    field: str  # the form field it is about
    text: str


@dataclass(frozen=True)
class Evaluation:
    price: Price
    messages: tuple[Message, ...] = field(default_factory=tuple)

    @property
    def errors(self) -> tuple[Message, ...]:
        return tuple(m for m in self.messages if m.level == ERROR)

    @property
    def ok(self) -> bool:
        return not self.errors


def check(config: Configuration, *, recommended_nvme_tb: float | None = None,
          stock: int | None = None, plan: dict | None = None, stacks: tuple = ()) -> tuple[Message, ...]:
    """The rules, each with a message a customer can act on. `plan` is the sizing plan the
    configuration came from; `stacks` the catalog's strategy stacks (to name one that can run it)."""
    messages: list[Message] = plan_fit_messages(config, plan)
    stack = stack_message(config.strategy, plan, stacks)
    if stack is not None:
        messages.append(stack)
    n, net = config.node_count, config.network
    if not 1 <= n <= MAX_NODES:
        messages.append(Message(ERROR, "node_count", f"Choose between 1 and {MAX_NODES} nodes."))
    is_ib = net.kind == "infiniband"
    if n > 1 and net.speed_gbps <= 1:
        messages.append(Message(
            ERROR, "network", f"{net.name} is for single-node orders only. For {n} nodes choose "
            "InfiniBand or 100 GbE so gradients are not stuck on the wire."))
    elif n > 1 and not is_ib and net.speed_gbps < MIN_MULTI_NODE_ETHERNET_GBPS:
        messages.append(Message(
            ERROR, "network", f"Multi-node training needs InfiniBand or at least "
            f"{MIN_MULTI_NODE_ETHERNET_GBPS} GbE between nodes; {net.name} is too slow for {n} nodes."))
    if getattr(net, "on_request", False):
        messages.append(Message(
            INFO, "network", f"{net.name} is on request: staff confirm the fabric before approval."))
    if recommended_nvme_tb and config.nvme.size_tb < recommended_nvme_tb:
        messages.append(Message(
            WARNING, "nvme", f"{config.nvme.size_tb} TB is below the {tb(recommended_nvme_tb)} "
            "recommended for the dataset, kept checkpoints and scratch space."))
    if stock is not None and stock < n:
        messages.append(Message(WARNING, "sku", stock_text(config.sku.name, ready=stock,
                                                           requested=n)))
    messages += _storage_rules(config)
    if config.storage_tb and config.storage_provider is None:
        messages.append(Message(ERROR, "storage_provider",
                                "Choose an object-storage provider for the bucket, or set 0 TB."))
    if not 0 <= config.storage_tb <= MAX_STORAGE_TB:
        messages.append(Message(ERROR, "storage_tb",
                                f"Object storage is sized between 0 and {MAX_STORAGE_TB} TB."))
    return tuple(messages)


def stock_text(sku_name: str, *, ready: int | None, requested: int) -> str:
    """How many nodes are ready against how many are asked for, and what happens then (the
    configurator, the quote and the order pages); "" when stock covers it."""
    if ready is None or ready >= requested:
        return ""
    then = ("the order waits in the approval queue until staff have {rest}; we e-mail you when "
            "it is approved, and you can cancel for free until then.")
    if ready == 0:
        return (f"{sku_name} is out of stock (0 ready, {requested} requested): "
                + then.format(rest="a node free" if requested == 1 else "the nodes free"))
    return (f"Only {ready} {sku_name} node{'s' if ready != 1 else ''} in stock for {requested} "
            f"requested: " + then.format(rest="the rest"))


def plan_fit_messages(config: Configuration, plan: dict | None) -> list[Message]:
    """The sizing plan against the chosen server (``portal.quotes.fit``, the verdict the order
    page and the approval queue give): memory per GPU that does not fit blocks the quote; a
    server or node count other than the plan's is a warning."""
    if not plan:
        return []
    fit = plan_fit_verdict(plan, sku=config.sku, node_count=config.node_count)
    if fit.memory_fits is False:
        return [Message(ERROR, "sku", f"Does not fit: {fit.summary} Choose a server with more "
                                      f"memory per GPU, or size the job again for this one.")]
    if fit.fits is False:
        return [Message(WARNING, "sku", f"{fit.summary} The memory figures are for the plan's "
                                        f"layout: size the job again to check this server.")]
    return []


_BUCKET_NAME = re.compile(r"^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$")


def _storage_rules(config: Configuration) -> list[Message]:
    messages = []
    days = config.storage_retention_days
    if days is not None and not MIN_RETENTION_DAYS <= days <= MAX_RETENTION_DAYS:
        messages.append(Message(ERROR, "storage_retention_days",
                                f"Keep the bucket between {MIN_RETENTION_DAYS} and "
                                f"{MAX_RETENTION_DAYS} days after termination."))
    if config.storage_kind != "custom":
        return messages
    custom = config.custom_storage or CustomStorage()
    if problem := url_problem(custom.endpoint_url):
        messages.append(Message(ERROR, "storage_endpoint_url", f"Your S3 endpoint: {problem}"))
    if not _BUCKET_NAME.match(custom.bucket or ""):
        messages.append(Message(ERROR, "storage_bucket",
                                "Give the name of your bucket (3–63 lowercase letters, digits, "
                                "dots and hyphens)."))
    if not (custom.access_key_id and custom.secret_key):
        messages.append(Message(ERROR, "storage_access_key_id",
                                "Give an access key id and secret that can read and write the bucket."))
    return messages


def evaluate(config: Configuration, *, recommended_nvme_tb: float | None = None,
             stock: int | None = None, plan: dict | None = None, stacks: tuple = (),
             price_list: PriceList | None = None) -> Evaluation:
    return Evaluation(price=price(config, price_list),
                      messages=check(config, recommended_nvme_tb=recommended_nvme_tb, stock=stock,
                                     plan=plan, stacks=stacks))


def stack_message(strategy, plan: dict | None, stacks=()) -> Message | None:
    """The one check of a chosen training stack against the sizing plan (configurator, quote and
    order creation, API serializers): an error naming what the stack cannot run and a stack that
    can; None when no stack is chosen, the plan says nothing, or the stack runs it."""
    if strategy is None or not plan:
        return None
    problem = stack_problem(strategy, Needs.from_plan(plan), stacks)
    return Message(ERROR, "strategy", problem) if problem else None


def pick_nvme(options, size_tb: float, raid: str | None = None):
    """The smallest option at least `size_tb` large (the matching RAID layout first)."""
    options = sorted(options, key=lambda o: (o.size_tb, o.price_monthly))
    if not options:
        return None
    big_enough = [o for o in options if o.size_tb >= size_tb] or [options[-1]]
    smallest = big_enough[0].size_tb
    same_size = [o for o in big_enough if o.size_tb == smallest]
    return next((o for o in same_size if raid and o.raid == raid), same_size[0])


def pick_network(options, *, nodes: int, kind: str | None = None, speed_gbps: float | None = None):
    """The slowest option of `kind` at `speed_gbps` or faster when asked for one; else the cheapest
    one the rules allow for `nodes` (the default one for a single node)."""
    options = sorted(options, key=lambda o: (o.speed_gbps, o.price_monthly))
    if kind or speed_gbps:
        for o in options:
            if (kind is None or o.kind == kind) and (speed_gbps is None or o.speed_gbps >= speed_gbps):
                return o
    allowed = [o for o in options if nodes == 1 or o.kind == "infiniband"
               or o.speed_gbps >= MIN_MULTI_NODE_ETHERNET_GBPS]
    if nodes == 1:
        default = next((o for o in allowed if getattr(o, "is_default", False)), None)
        return default or (allowed[0] if allowed else None)
    infiniband = [o for o in allowed if o.kind == "infiniband"]
    return (infiniband or allowed or [None])[0]
