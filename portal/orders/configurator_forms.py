import math

from django import forms

from portal.catalog.models import NetworkOption, NvmeOption, StackOption, StorageProvider
from portal.catalog.selectors import sku_list
from portal.orders import configurator
from portal.orders.quotes import plan_unsign


class SkuChoiceField(forms.ModelChoiceField):
    def label_from_instance(self, sku):
        return f"{sku.gpu_count}× {sku.gpu.name} · {sku.get_interconnect_display()} · ${sku.price_hourly}/h"


class NvmeChoiceField(forms.ModelChoiceField):
    def label_from_instance(self, o):
        return f"{o.size_tb} TB · {o.get_raid_display()} ({o.drives} drive{'s' if o.drives > 1 else ''})" \
            f" · ${o.price_monthly}/mo"


class NetworkChoiceField(forms.ModelChoiceField):
    def label_from_instance(self, o):
        extra = " · on request" if o.on_request else ""
        price = f"${o.price_monthly}/mo" if o.price_monthly else "included"
        return f"{o.name} · {price}{extra}"


class StorageChoiceField(forms.ModelChoiceField):
    def label_from_instance(self, o):
        return f"{o.name} · ${o.price_per_tb_monthly}/TB·mo" if o.price_per_tb_monthly \
            else f"{o.name} · billed by your provider"


class ConfiguratorForm(forms.Form):
    """The server configuration. Works from GET parameters too, so links and logins carry it."""

    sku = SkuChoiceField(queryset=sku_list(), to_field_name="slug", label="GPU server",
                         empty_label=None)
    node_count = forms.IntegerField(label="Nodes", min_value=1, max_value=configurator.MAX_NODES,
                                    initial=1, help_text="Identical servers joined by the network.")
    nvme = NvmeChoiceField(queryset=NvmeOption.objects.all(), to_field_name="slug",
                           label="NVMe scratch (per node)", empty_label=None)
    network = NetworkChoiceField(queryset=NetworkOption.objects.all(), to_field_name="slug",
                                 label="Network", empty_label=None)
    storage_provider = StorageChoiceField(queryset=StorageProvider.objects.all(), to_field_name="slug",
                                          label="Object storage", required=False,
                                          empty_label="No bucket")
    storage_tb = forms.IntegerField(label="Bucket size (TB)", min_value=0,
                                    max_value=configurator.MAX_STORAGE_TB, initial=0,
                                    help_text="For datasets and archived checkpoints.")
    strategy = forms.ModelChoiceField(queryset=StackOption.objects.filter(kind="strategy"),
                                      to_field_name="slug", label="Training stack", required=False,
                                      empty_label="Decide later")
    tracker = forms.ModelChoiceField(queryset=StackOption.objects.filter(kind="tracker"),
                                     to_field_name="slug", label="Experiment tracker", required=False,
                                     empty_label="None")
    plan = forms.CharField(widget=forms.HiddenInput, required=False)

    def __init__(self, *args, organisations=None, **kwargs):
        super().__init__(*args, **kwargs)
        self.plan_data: dict = {}
        if organisations is not None and len(organisations) > 1:
            self.fields["organisation"] = forms.ModelChoiceField(
                queryset=organisations, to_field_name="slug", label="Quote for", empty_label=None)
        for name, field in self.fields.items():
            field.widget.attrs.setdefault("aria-describedby", f"rules-{name}")

    def clean_plan(self):
        token = self.cleaned_data.get("plan") or ""
        if token:
            try:
                self.plan_data = plan_unsign(token)
            except ValueError as exc:
                raise forms.ValidationError(str(exc)) from None
        return token

    def configuration(self) -> configurator.Configuration:
        d = self.cleaned_data
        return configurator.Configuration(
            sku=d["sku"], node_count=d["node_count"], nvme=d["nvme"], network=d["network"],
            storage_provider=d.get("storage_provider"), storage_tb=d.get("storage_tb") or 0,
            strategy=d.get("strategy"), tracker=d.get("tracker"))


def initial_from_plan(plan: dict) -> dict:
    """Form values that reproduce a sizing plan (SKU, nodes, NVMe, network, bucket, stack)."""
    nodes = int(plan.get("nodes") or 1)
    initial: dict = {"node_count": nodes}
    sku = sku_list().filter(slug=plan.get("sku")).first()
    if sku:
        initial["sku"] = sku.slug
    nvme = NvmeOption.objects.filter(slug=plan.get("nvme_option") or "").first() or configurator.pick_nvme(
        NvmeOption.objects.all(), float(plan.get("nvme_tb") or 0), plan.get("raid"))
    if nvme:
        initial["nvme"] = nvme.slug
    network = _network_for(plan.get("network"), nodes)
    if network:
        initial["network"] = network.slug
    storage_tb = math.ceil(float(plan.get("storage_tb") or 0))
    if storage_tb:
        initial["storage_tb"] = storage_tb
        provider = (StorageProvider.objects.filter(slug=plan.get("storage_provider") or "").first()
                    or StorageProvider.objects.filter(kind="minio").first()
                    or StorageProvider.objects.first())
        initial["storage_provider"] = provider.slug if provider else None
    strategy = _strategy_for(plan)
    if strategy:
        initial["strategy"] = strategy.slug
    return initial


def default_initial() -> dict:
    skus = list(sku_list())
    nvswitch = [s for s in skus if s.interconnect == "nvswitch"] or skus
    sku = next((s for s in nvswitch if getattr(s, "stock", None) != 0), nvswitch[0] if nvswitch else None)
    network = configurator.pick_network(NetworkOption.objects.all(), nodes=1)
    nvme = NvmeOption.objects.first()
    return {"sku": sku.slug if sku else None, "node_count": 1, "nvme": nvme.slug if nvme else None,
            "network": network.slug if network else None, "storage_tb": 0}


def _network_for(value, nodes: int):
    """The plan names a network by slug, by name or by a dict with kind/speed."""
    options = NetworkOption.objects.all()
    if isinstance(value, dict):
        slug = value.get("slug")
        kind, speed = value.get("kind"), value.get("speed_gbps")
        if isinstance(speed, bool) or not isinstance(speed, int | float):
            speed = None  # a plan from the API may say anything here
    else:
        slug, kind, speed = value, None, None
    if slug:
        match = next((o for o in options if slug in (o.slug, o.name)), None)
        if match:
            return match
        text = str(slug).lower()
        kind = "infiniband" if ("ib" in text.split("-") or "infiniband" in text) else kind
        digits = "".join(c if c.isdigit() else " " for c in text).split()
        speed = float(digits[0]) if digits else speed
    return configurator.pick_network(options, nodes=nodes, kind=kind, speed_gbps=speed)


def _strategy_for(plan: dict):
    exact = StackOption.objects.filter(kind="strategy", slug=plan.get("stack") or "").first()
    if exact:
        return exact
    text = " ".join(str(plan.get(k) or "") for k in ("strategy", "stack")).lower()
    stack = plan.get("stack")
    if isinstance(stack, dict):
        text += " " + " ".join(str(v) for v in stack.values()).lower()
    options = {o.slug: o for o in StackOption.objects.filter(kind="strategy")}
    for needle, slug in (("deepspeed", "deepspeed"), ("zero", "deepspeed"),
                         ("fsdp", "fsdp"), ("ddp", "ddp")):
        if needle in text and slug in options:
            return options[slug]
    return None
