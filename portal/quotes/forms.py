from django import forms
from django.conf import settings

from portal.catalog.models import NetworkOption, NvmeOption, StackOption, StorageProvider
from portal.catalog.pricing import PriceList
from portal.catalog.selectors import sku_list
from portal.core.forms import VisibleTextMixin
from portal.core.units import usd
from portal.quotes.configuration import Configuration, CustomStorage
from portal.quotes.plans import plan_check, plan_to_configuration
from portal.quotes.pricing import unit_price
from portal.quotes.rules import (
    MAX_NODES,
    MAX_RETENTION_DAYS,
    MAX_STORAGE_TB,
    MIN_RETENTION_DAYS,
    pick_network,
)
from portal.sizing.plan_tokens import plan_unsign

NODE_OPTIONS = ("nvme", "network")  # priced per node, as part of the server's line


class PricedChoiceField(forms.ModelChoiceField):
    """A choice whose label shows a price as the paying organisation's price list sets it
    (``price_list``, set by the form; None: list prices)."""

    price_list: PriceList | None = None

    def paid(self, kind: str, item, amount):
        return unit_price(kind, item, amount, self.price_list)


class SkuChoiceField(PricedChoiceField):
    def label_from_instance(self, sku):
        return (f"{sku.gpu_count}× {sku.gpu.name} · {sku.get_interconnect_display()} · "
                f"{usd(self.paid('sku', sku, sku.price_hourly))}/h")


class NvmeChoiceField(PricedChoiceField):
    def label_from_instance(self, o):
        return f"{o.size_tb} TB · {o.get_raid_display()} ({o.drives} drive{'s' if o.drives > 1 else ''})" \
            f" · {usd(self.paid('nvme', o, o.price_monthly))}/mo"


class NetworkChoiceField(PricedChoiceField):
    def label_from_instance(self, o):
        extra = " · on request" if o.on_request else ""
        price = f"{usd(self.paid('network', o, o.price_monthly))}/mo" if o.price_monthly else "included"
        return f"{o.name} · {price}{extra}"


class StorageChoiceField(PricedChoiceField):
    def label_from_instance(self, o):
        if not o.price_per_tb_monthly:
            return f"{o.name} · billed by your provider"
        return f"{o.name} · {usd(self.paid('storage', o, o.price_per_tb_monthly))}/TB·mo"


class ConfiguratorForm(VisibleTextMixin, forms.Form):
    """The server configuration. Works from GET parameters too, so links and logins carry it."""

    sku = SkuChoiceField(queryset=sku_list(), to_field_name="slug", label="GPU server",
                         empty_label=None)
    node_count = forms.IntegerField(label="Nodes", min_value=1, max_value=MAX_NODES,
                                    initial=1, help_text="Identical servers joined by the network.")
    nvme = NvmeChoiceField(queryset=NvmeOption.objects.all(), to_field_name="slug",
                           label="NVMe scratch (per node)", empty_label=None)
    network = NetworkChoiceField(queryset=NetworkOption.objects.all(), to_field_name="slug",
                                 label="Network", empty_label=None)
    storage_provider = StorageChoiceField(queryset=StorageProvider.objects.all(), to_field_name="slug",
                                          label="Object storage", required=False,
                                          empty_label="No bucket")
    storage_tb = forms.IntegerField(label="Bucket size (TB)", min_value=0,
                                    max_value=MAX_STORAGE_TB, initial=0,
                                    help_text="For datasets and archived checkpoints.")
    storage_retention_days = forms.IntegerField(
        label="Keep the bucket after termination (days)", min_value=MIN_RETENTION_DAYS,
        max_value=MAX_RETENTION_DAYS, required=False,
        help_text="Checkpoints are copied to the bucket at termination and kept this long.")
    # Only for "Your own S3 endpoint": we check access and write the config on the nodes.
    storage_endpoint_url = forms.URLField(label="Your S3 endpoint", required=False,
                                          assume_scheme="https",
                                          help_text="e.g. https://s3.eu-central-1.amazonaws.com")
    storage_bucket = forms.CharField(label="Your bucket", max_length=63, required=False)
    storage_access_key_id = forms.CharField(label="Access key id", max_length=128, required=False)
    storage_secret_key = forms.CharField(label="Secret access key", max_length=256, required=False,
                                         widget=forms.PasswordInput(render_value=False),
                                         help_text="Stored encrypted; never shown again.")
    strategy = forms.ModelChoiceField(queryset=StackOption.objects.filter(kind="strategy"),
                                      to_field_name="slug", label="Training stack", required=False,
                                      empty_label="Decide later")
    tracker = forms.ModelChoiceField(queryset=StackOption.objects.filter(kind="tracker"),
                                     to_field_name="slug", label="Experiment tracker", required=False,
                                     empty_label="None")
    plan = forms.CharField(widget=forms.HiddenInput, required=False)

    def __init__(self, *args, organisations=None, price_list: PriceList | None = None, **kwargs):
        super().__init__(*args, **kwargs)
        self.plan_data: dict = {}
        options = price_list.options_of(f"sku:{self.data.get('sku', '')}") if price_list else None
        for name, field in self.fields.items():
            if isinstance(field, PricedChoiceField):
                field.price_list = options if name in NODE_OPTIONS else price_list
        self.options_follow_sku = options is not price_list
        if organisations is not None and len(organisations) > 1:
            self.fields["organisation"] = forms.ModelChoiceField(
                queryset=organisations, to_field_name="slug", label="Quote for", empty_label=None)
        for name, field in self.fields.items():
            field.widget.attrs.setdefault("aria-describedby", f"rules-{name}")

    def node_options_oob(self) -> list[str]:
        """The NVMe and network choices again, to replace the page's (htmx out of band) when
        their prices follow the chosen server (``options_follow_sku``)."""
        return [self[name].as_widget(attrs={"hx-swap-oob": "true"}) for name in NODE_OPTIONS]

    def clean_plan(self):
        token = self.cleaned_data.get("plan") or ""
        if token:
            try:
                self.plan_data = plan_check(plan_unsign(token))
            except ValueError as exc:
                raise forms.ValidationError(str(exc)) from None
        return token

    def configuration(self) -> Configuration:
        d = self.cleaned_data
        return Configuration(
            sku=d["sku"], node_count=d["node_count"], nvme=d["nvme"], network=d["network"],
            storage_provider=d.get("storage_provider"), storage_tb=d.get("storage_tb") or 0,
            strategy=d.get("strategy"), tracker=d.get("tracker"),
            storage_retention_days=d.get("storage_retention_days"),
            custom_storage=CustomStorage(
                endpoint_url=d.get("storage_endpoint_url") or "", bucket=d.get("storage_bucket") or "",
                access_key_id=(d.get("storage_access_key_id") or "").strip(),
                secret_key=(d.get("storage_secret_key") or "").strip()))


def initial_from_plan(plan: dict) -> dict:
    """Form values that reproduce a sizing plan (SKU, nodes, NVMe, network, bucket, stack)."""
    config = plan_to_configuration(plan)
    initial: dict = {"node_count": config.node_count,
                     "storage_retention_days": settings.STORAGE_RETENTION_DAYS}
    for name in ("sku", "nvme", "network", "storage_provider", "strategy"):
        chosen = getattr(config, name)
        if chosen is not None:
            initial[name] = chosen.slug
    if config.storage_tb:
        initial["storage_tb"] = config.storage_tb
    return initial


def default_sku(skus):
    """A sensible small server to start from: the cheapest one-GPU SKU with a node ready (else
    the cheapest one-GPU SKU, else the cheapest), not the biggest machine in the catalog."""
    by_price = sorted(skus, key=lambda s: (s.price_hourly, s.gpu_count, s.slug))
    single = [s for s in by_price if s.gpu_count == 1] or by_price
    return next((s for s in single if getattr(s, "stock", 0)), single[0] if single else None)


def default_initial() -> dict:
    sku = default_sku(list(sku_list()))
    network = pick_network(NetworkOption.objects.all(), nodes=1)
    nvme = NvmeOption.objects.first()
    return {"sku": sku.slug if sku else None, "node_count": 1, "nvme": nvme.slug if nvme else None,
            "network": network.slug if network else None, "storage_tb": 0,
            "storage_retention_days": settings.STORAGE_RETENTION_DAYS}
