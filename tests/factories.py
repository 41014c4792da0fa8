"""Factories for tests: organisations and people, quotes and orders (needs the seeded catalog,
the `catalog` fixture), simulated nodes, and `drain` to run a pipeline run in this process."""

import itertools
import time
from datetime import timedelta
from decimal import Decimal

import factory
from django.utils import timezone
from django_otp import DEVICE_ID_SESSION_KEY
from django_otp.oath import hotp
from django_otp.plugins.otp_totp.models import TOTPDevice

from portal.accounts.models import Membership, Organisation, User
from portal.accounts.two_factor import LoginStep, login_step
from portal.billing.services import usage_sync
from portal.catalog.models import NetworkOption, NvmeOption, ServerSKU, StackOption, StorageProvider
from portal.orders.models import Order
from portal.orders.services import order_place
from portal.orders.states import OrderState
from portal.quotes.models import Quote
from provisioning.fulfilment.approvals import order_approve
from provisioning.fulfilment.orders import order_submit
from provisioning.models import Node, NodeEvent, StepRun
from provisioning.pipeline.engine import step_execute
from provisioning.pipeline.runs import run_start
from provisioning.states import NodeState, WipeMethod


class OrganisationFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Organisation

    name = factory.Sequence(lambda n: f"Org {n}")
    slug = factory.Sequence(lambda n: f"org-{n}")


class UserFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = User
        skip_postgeneration_save = True

    username = factory.Sequence(lambda n: f"user{n}")
    email = factory.LazyAttribute(lambda u: f"{u.username}@example.com")
    password = factory.PostGenerationMethodCall("set_password", "correct-horse-battery")

    @factory.post_generation
    def save_password(obj, create, extracted, **kwargs):
        if create:
            obj.save()


class MembershipFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Membership

    user = factory.SubFactory(UserFactory)
    organisation = factory.SubFactory(OrganisationFactory)


def member_of(organisation, **user_kwargs):
    user = UserFactory(**user_kwargs)
    MembershipFactory(user=user, organisation=organisation)
    return user


def staff(role: str, *, two_factor: bool = True, **user_kwargs):
    """A staff member; with an authenticator app set up (as every staff member has after their
    first sign-in) unless ``two_factor=False``."""
    user = UserFactory(staff_role=role, is_staff=True, **user_kwargs)
    if two_factor:
        two_factor_device(user)
    return user


# --- two-factor sign-in -------------------------------------------------------------------------
def two_factor_device(user) -> TOTPDevice:
    """The person's confirmed authenticator app (created once)."""
    device = TOTPDevice.objects.filter(user=user, confirmed=True).first()
    return device or TOTPDevice.objects.create(user=user, name="Authenticator app", confirmed=True)


def totp_token(device: TOTPDevice) -> str:
    """What the authenticator app shows now (django-otp's TOTP algorithm), never a token the device
    accepted before: a token works once, so a second sign-in within 30 s takes the next step's
    (within the device's tolerance) or waits for it."""
    device.refresh_from_db()
    while True:
        now_t = int((time.time() - device.t0) // device.step) + device.drift
        t = max(now_t, device.last_t + 1)
        if t <= now_t + device.tolerance:
            return f"{hotp(device.bin_key, t, digits=device.digits):0{device.digits}d}"
        time.sleep(1)


def verified_login(client, user):
    """``client.force_login`` past the second factor too: a session that passed its token step
    (what staff and members of an organisation that requires it need to reach any page)."""
    client.force_login(user)
    if login_step(user) != LoginStep.DONE:
        session = client.session
        session[DEVICE_ID_SESSION_KEY] = two_factor_device(user).persistent_id
        session.save()
    return client


H100_SKU = "8x-h100-sxm-80gb"
L4_SKU = "1x-l4-24gb"

# What the wizard attaches to a quote for Llama 3.1 8B on 8× H100 (unversioned, as older quotes).
SIZED_PLAN = {
    "model": "llama-3.1-8b", "model_label": "Llama 3.1 8B", "sku": H100_SKU, "nodes": 1,
    "gpus_per_node": 8, "gpu_name": "NVIDIA H100 SXM5 80GB", "strategy": "fsdp", "tp": 1, "pp": 1,
    "micro_batch": 4, "grad_accum": 8, "per_gpu_total_bytes": 61_400_000_000,
    "gpu_memory_bytes": 80_000_000_000, "headroom_bytes": 14_600_000_000, "train_hours": 21.4,
    "memory_breakdown_bytes": {"weights": 2_000_000_000, "optimizer_states": 12_000_000_000},
}


def make_quote(organisation, *, by=None, sku: str = H100_SKU, node_count: int = 1,
               network: str = "eth-100g", nvme: str = "nvme-2tb-single", storage: str | None = None,
               storage_tb: int = 0, valid_days: int = 14, plan: dict | None = None) -> Quote:
    sku_row = ServerSKU.objects.get(slug=sku)
    return Quote.objects.create(
        organisation=organisation, created_by=by, sku=sku_row, node_count=node_count,
        nvme=NvmeOption.objects.get(slug=nvme), network=NetworkOption.objects.get(slug=network),
        storage_provider=StorageProvider.objects.get(slug=storage) if storage else None,
        storage_tb=storage_tb, strategy=StackOption.objects.get(slug="fsdp"),
        tracker=StackOption.objects.get(slug="tensorboard"),
        plan=plan if plan is not None else {"model": "Llama-3-8B", "sku": sku, "nodes": node_count,
                                            "headroom_bytes": 12_000_000_000},
        price_lines=[{"label": sku_row.name, "hourly": str(sku_row.price_hourly),
                      "monthly": str(sku_row.price_monthly)}],
        price_hourly=sku_row.price_hourly * node_count,
        price_monthly=sku_row.price_monthly * node_count + Decimal("56.00"),
        valid_until=timezone.now() + timedelta(days=valid_days),
    )


def make_order(organisation, *, state: str = OrderState.DRAFT, by=None, **quote_kwargs) -> Order:
    """An order in ``state`` written directly (for state-table tests; real flows use services)."""
    quote = make_quote(organisation, by=by, **quote_kwargs)
    return Order.objects.create(
        organisation=organisation, placed_by=by, quote=quote, sku=quote.sku,
        node_count=quote.node_count, nvme=quote.nvme, network=quote.network,
        storage_provider=quote.storage_provider, storage_tb=quote.storage_tb,
        strategy=quote.strategy, tracker=quote.tracker, plan=quote.plan,
        price_lines=quote.price_lines, price_hourly=quote.price_hourly,
        price_monthly=quote.price_monthly, state=state,
    )


def metered_order(organisation, hours: float, *, start, **quote_kwargs) -> Order:
    """An active order whose one node was metered for ``hours`` from ``start`` (no storage)."""
    order = make_order(organisation, state=OrderState.ACTIVE, **quote_kwargs)
    usage_sync(order=order, nodes={1: "gpu-1"}, storage=False, at=start, cause="t")
    usage_sync(order=order, nodes={}, storage=False, at=start + timedelta(hours=hours), cause="t")
    return order


_numbers = itertools.count(1)


def make_node(*, sku: str | ServerSKU, state_dir, state: str = NodeState.READY,
              fabric_group: str = "", hostname: str | None = None, **options) -> Node:
    """A simulated node (``options`` go to the driver: fail, exit_status, delays, …)."""
    sku_row = sku if isinstance(sku, ServerSKU) else ServerSKU.objects.get(slug=sku)
    number = next(_numbers)
    node = Node.objects.create(
        hostname=hostname or f"gpu-{number:04d}", sku=sku_row,
        management_address=f"10.0.{number // 250}.{number % 250 + 1}", driver="simulated",
        driver_options={"delay_scale": 0, "state_dir": str(state_dir), **options},
        fabric_group=fabric_group, nvme_devices=["/dev/nvme0n1", "/dev/nvme1n1"], state=state,
        wipe_method=WipeMethod.DISCARD,
    )
    NodeEvent.objects.create(node=node, transition="enrol", from_state=NodeState.ENROLLED,
                             to_state=state, note="test fixture")
    return node


def submitted_order(people, **quote_kwargs):
    """Alice's order, placed from a fresh quote and submitted (pending approval, or approved by
    the SKU's policy)."""
    quote = make_quote(people.acme, by=people.alice, **quote_kwargs)
    return order_submit(order=order_place(quote=quote, by=people.alice), by=people.alice)


def approved_order(people, **quote_kwargs):
    """Alice's order, submitted and approved by sam (its nodes reserved)."""
    return order_approve(order=submitted_order(people, **quote_kwargs), by=people.sam)


def drain(run_id: int, *, limit: int = 500) -> list:
    """Runs a started run's steps in this process, as workers would, until nothing is left.

    A step waiting to retry (a transient failure's backoff, or a cluster step waiting for the
    other nodes) is run again at once: ``retry_at`` moved to now, as if the Celery task's
    countdown had run out."""
    queue = list(run_start(run_id=run_id))
    outcomes = []
    while queue:
        if len(outcomes) >= limit:
            raise AssertionError(f"run {run_id} did not settle after {limit} step executions")
        key = queue.pop(0)
        outcome = step_execute(run_id=key[0], node_id=key[1], step=key[2])
        outcomes.append((key, outcome))
        queue.extend(outcome.next_steps)
        if outcome.status in ("retry", "waiting"):
            StepRun.objects.filter(run_id=key[0], node_id=key[1], step=key[2]).update(
                retry_at=timezone.now())
            queue.append(key)
    return outcomes
