from decimal import Decimal

from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models
from django.db.models import Q
from django.dispatch import Signal

from portal.catalog.capabilities import (
    FEATURES,
    data_parallel_problems,
    model_family_problems,
    package_problems,
)

# A bulk ``update()`` of catalog rows (Django sends no post_save for it): the catalog cache
# listens (connected in CatalogConfig.ready), so the models import nothing of the cache.
catalog_rows_updated = Signal()


class CatalogQuerySet(models.QuerySet):
    """A bulk ``update()`` sends no post_save: it says so with ``catalog_rows_updated``."""

    def update(self, **kwargs):
        changed = super().update(**kwargs)
        if changed:
            catalog_rows_updated.send(sender=self.model)
        return changed


class CatalogVersion(models.Model):
    """One row, bumped in the transaction of every change to the catalog or a price list: each
    process keeps the catalog in memory and reloads it when this number moved
    (``portal.catalog.cache``)."""

    version = models.PositiveBigIntegerField(default=0)
    changed_at = models.DateTimeField(auto_now=True)

    def __str__(self) -> str:
        return f"catalog version {self.version}"


class GPUModel(models.Model):
    """Datasheet figures (shared/reference/gpu_specs.json). TFLOPS are dense tensor figures."""

    slug = models.SlugField(unique=True)
    name = models.CharField(max_length=100)
    arch = models.CharField(max_length=60)
    form_factor = models.CharField(max_length=80)
    memory_gb = models.DecimalField("memory (GB)", max_digits=6, decimal_places=1,
                                    help_text="Vendor GB (10⁹ bytes).")
    memory_type = models.CharField(max_length=20)
    memory_bandwidth_gbps = models.PositiveIntegerField("memory bandwidth (GB/s)")
    fp32_tflops = models.DecimalField("FP32 TFLOPS", max_digits=7, decimal_places=2)
    bf16_tflops = models.DecimalField("BF16/FP16 dense TFLOPS", max_digits=7, decimal_places=2)
    fp8_tflops = models.DecimalField("FP8 dense TFLOPS", max_digits=7, decimal_places=2,
                                     null=True, blank=True)
    nvlink_gbps = models.PositiveIntegerField("NVLink (GB/s per GPU)", null=True, blank=True)
    pcie_gen = models.PositiveSmallIntegerField("PCIe generation")
    tdp_w = models.PositiveIntegerField("TDP (W)")

    objects = CatalogQuerySet.as_manager()

    class Meta:
        ordering = ["-bf16_tflops", "name"]
        verbose_name = "GPU model"

    def __str__(self) -> str:
        return self.name

    @property
    def memory_bytes(self) -> int:
        return int(self.memory_gb * Decimal(10**9))


class ServerSKU(models.Model):
    class Interconnect(models.TextChoices):
        PCIE = "pcie", "PCIe"
        NVLINK_BRIDGE = "nvlink-bridge", "NVLink bridge"
        NVSWITCH = "nvswitch", "NVLink / NVSwitch"

    class ApprovalPolicy(models.TextChoices):
        MANUAL = "manual", "Staff approves every order"
        AUTO_SMALL = "auto_small", "Automatic for small single-node orders of existing customers"

    slug = models.SlugField(unique=True)
    name = models.CharField(max_length=120)
    gpu = models.ForeignKey(GPUModel, on_delete=models.PROTECT, related_name="skus")
    gpu_count = models.PositiveSmallIntegerField(choices=[(n, str(n)) for n in (1, 2, 4, 8)])
    interconnect = models.CharField(max_length=16, choices=Interconnect.choices)
    cpu_cores = models.PositiveSmallIntegerField()
    ram_gb = models.PositiveIntegerField("RAM (GB)")
    price_hourly = models.DecimalField("price per hour (USD)", max_digits=8, decimal_places=2)
    price_monthly = models.DecimalField("price per month (USD)", max_digits=10, decimal_places=2)
    approval_policy = models.CharField(max_length=16, choices=ApprovalPolicy.choices,
                                       default=ApprovalPolicy.MANUAL)
    is_active = models.BooleanField(default=True)
    nccl_busbw_gbps = models.FloatField(
        "NCCL all-reduce bus bandwidth (GB/s)", null=True, blank=True,
        help_text="Expected nccl-tests all_reduce_perf bus bandwidth over all GPUs of one node; "
                  "acceptance fails a node below 80% of it. Empty: no baseline (1-GPU SKUs).")

    objects = CatalogQuerySet.as_manager()

    class Meta:
        ordering = ["gpu__name", "gpu_count"]
        verbose_name = "server SKU"

    def __str__(self) -> str:
        return self.name


class NvmeOption(models.Model):
    class Raid(models.TextChoices):
        SINGLE = "single", "Single drive"
        RAID0 = "raid0", "RAID 0 (striped)"
        RAID10 = "raid10", "RAID 10 (striped mirrors)"

    slug = models.SlugField(unique=True)
    size_tb = models.PositiveSmallIntegerField("usable size (TB)")
    drives = models.PositiveSmallIntegerField()
    raid = models.CharField(max_length=8, choices=Raid.choices)
    price_monthly = models.DecimalField(max_digits=8, decimal_places=2)

    objects = CatalogQuerySet.as_manager()

    class Meta:
        ordering = ["size_tb", "raid"]
        verbose_name = "NVMe option"

    def __str__(self) -> str:
        return f"{self.size_tb} TB NVMe, {self.get_raid_display()}"


class NetworkOption(models.Model):
    class Kind(models.TextChoices):
        ETHERNET = "ethernet", "Ethernet"
        INFINIBAND = "infiniband", "InfiniBand"

    slug = models.SlugField(unique=True)
    name = models.CharField(max_length=60)
    kind = models.CharField(max_length=12, choices=Kind.choices)
    speed_gbps = models.PositiveIntegerField("speed (Gb/s)")
    on_request = models.BooleanField(default=False, help_text="Needs a staff check of the fabric.")
    is_default = models.BooleanField(default=False)
    price_monthly = models.DecimalField(max_digits=8, decimal_places=2)

    objects = CatalogQuerySet.as_manager()

    class Meta:
        ordering = ["speed_gbps"]

    def __str__(self) -> str:
        return self.name


class StorageProvider(models.Model):
    class Kind(models.TextChoices):
        MINIO = "minio", "On-site MinIO"
        WASABI = "wasabi", "Wasabi"
        B2 = "b2", "Backblaze B2"
        AWS = "aws", "AWS S3"
        CUSTOM = "custom", "Customer's own S3 endpoint"

    slug = models.SlugField(unique=True)
    name = models.CharField(max_length=60)
    kind = models.CharField(max_length=8, choices=Kind.choices)
    class AddressingStyle(models.TextChoices):
        PATH = "path", "Path (https://endpoint/bucket)"
        VIRTUAL = "virtual", "Virtual host (https://bucket.endpoint)"

    endpoint_url = models.URLField(blank=True)
    region = models.CharField(max_length=40, blank=True,
                              help_text="S3 region, e.g. us-east-1; blank: the provider's default.")
    addressing_style = models.CharField(max_length=8, choices=AddressingStyle.choices,
                                        default=AddressingStyle.PATH)
    price_per_tb_monthly = models.DecimalField(max_digits=8, decimal_places=2)

    objects = CatalogQuerySet.as_manager()

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name


def _validate_data_parallel(value) -> None:
    problems = data_parallel_problems(value)
    if problems:
        raise ValidationError("; ".join(problems))


def _validate_model_families(value) -> None:
    if problems := model_family_problems(value):
        raise ValidationError("; ".join(problems))


def _validate_packages(value) -> None:
    problems = package_problems(value)
    if problems:
        raise ValidationError("; ".join(problems))


class StackOption(models.Model):
    class Kind(models.TextChoices):
        STRATEGY = "strategy", "Parallel strategy"
        TRACKER = "tracker", "Experiment tracker"

    slug = models.SlugField(unique=True)
    name = models.CharField(max_length=60)
    kind = models.CharField(max_length=10, choices=Kind.choices)
    description = models.CharField(max_length=240, blank=True)
    # Capabilities (strategy stacks): what the stack can run (names in catalog/capabilities.py).
    data_parallel = models.JSONField(
        "data-parallel kinds", default=list, blank=True, validators=[_validate_data_parallel],
        help_text="e.g. [\"ddp\"], [\"zero1\", \"zero2\", \"zero3\"], [\"fsdp2-full-shard\", "
                  "\"fsdp2-hybrid-shard\"].")
    tensor_parallel = models.BooleanField(default=False)
    sequence_parallel = models.BooleanField(default=False)
    pipeline_parallel = models.BooleanField(default=False)
    context_parallel = models.BooleanField(default=False)
    cpu_offload = models.BooleanField("CPU offload", default=False)
    lora = models.BooleanField("LoRA", default=False)
    qlora = models.BooleanField("QLoRA", default=False)
    fp8 = models.BooleanField("fp8", default=False)
    op_level_checkpointing = models.BooleanField(
        "op-level selective checkpointing", default=False,
        help_text="Saves chosen ops' outputs and recomputes the rest (torchtitan's "
                  "selective_ac_option = \"op\"); the plan's checkpointing selective-op.")
    model_families = models.JSONField(
        default=list, blank=True, validators=[_validate_model_families],
        help_text="The model architectures the stack builds, e.g. [\"llama3\"] (torchtitan); "
                  "names in catalog/capabilities.py.")
    packages = models.JSONField(
        default=list, blank=True, validators=[_validate_packages],
        help_text="Pinned pip requirements the node installs for this stack, e.g. [\"torch==2.13.0\"].")

    objects = CatalogQuerySet.as_manager()

    class Meta:
        ordering = ["kind", "name"]

    def __str__(self) -> str:
        return self.name

    @property
    def features(self) -> list[str]:
        """The boolean capabilities it has, as a person reads them."""
        return [label for name, label in FEATURES.items() if getattr(self, name)]


# --- reseller price lists -------------------------------------------------------------------
PERCENT_VALIDATORS = [MinValueValidator(Decimal("-90")), MaxValueValidator(Decimal("500"))]
PERCENT_HELP = "+10 is a 10 % markup on the list price, −15 a 15 % discount."


class PriceList(models.Model):
    """What a reseller (and every customer it sells to) pays: the list prices with a markup or
    discount, one for everything and one per SKU or option where staff set it. Applied by the
    one price function, so the catalog, the configurator and every quote show the same numbers;
    a quote freezes the price it was made with."""

    organisation = models.OneToOneField("accounts.Organisation", on_delete=models.CASCADE,
                                        related_name="price_list", limit_choices_to={"kind": "reseller"})
    name = models.CharField(max_length=100, blank=True, help_text="e.g. 'Partner 2027'.")
    percent = models.DecimalField("everything else (%)", max_digits=5, decimal_places=2, default=0,
                                  validators=PERCENT_VALIDATORS, help_text=PERCENT_HELP)
    updated_at = models.DateTimeField(auto_now=True)

    objects = CatalogQuerySet.as_manager()

    class Meta:
        ordering = ["organisation__name"]

    def __str__(self) -> str:
        return self.name or f"Price list of {self.organisation}"

    def clean(self):
        if self.organisation_id and self.organisation.kind != "reseller":
            raise ValidationError({"organisation": "Price lists are for resellers; their customers "
                                                   "pay the reseller's list."})


PRICE_TARGETS = ("sku", "nvme", "network", "storage")


def _one_target() -> Q:
    only = [Q(**{f"{t}__isnull": t != target for t in PRICE_TARGETS}) for target in PRICE_TARGETS]
    condition = only[0]
    for q in only[1:]:
        condition |= q
    return condition


class PriceListItem(models.Model):
    """A markup or discount on one SKU or option (exactly one of them)."""

    TARGETS = PRICE_TARGETS

    price_list = models.ForeignKey(PriceList, on_delete=models.CASCADE, related_name="items")
    sku = models.ForeignKey(ServerSKU, null=True, blank=True, on_delete=models.CASCADE, related_name="+")
    nvme = models.ForeignKey(NvmeOption, null=True, blank=True, on_delete=models.CASCADE, related_name="+")
    network = models.ForeignKey(NetworkOption, null=True, blank=True, on_delete=models.CASCADE,
                                related_name="+")
    storage = models.ForeignKey(StorageProvider, null=True, blank=True, on_delete=models.CASCADE,
                                related_name="+")
    percent = models.DecimalField("adjustment (%)", max_digits=5, decimal_places=2,
                                  validators=PERCENT_VALIDATORS, help_text=PERCENT_HELP)

    objects = CatalogQuerySet.as_manager()

    class Meta:
        verbose_name = "price list item"
        constraints = [
            models.CheckConstraint(condition=_one_target(), name="price_list_item_names_one_target"),
            *[models.UniqueConstraint(fields=["price_list", target], name=f"one_price_list_item_per_{target}")
              for target in PRICE_TARGETS],
        ]

    def __str__(self) -> str:
        return f"{self.target} {self.percent:+}%"

    @property
    def target(self):
        return next((getattr(self, t) for t in self.TARGETS if getattr(self, f"{t}_id")), None)

    @property
    def key(self) -> str:
        """How the price function names the item: sku:<slug>, nvme:<slug>, …"""
        kind = next((t for t in self.TARGETS if getattr(self, f"{t}_id")), "")
        return f"{kind}:{self.target.slug}" if kind else ""

    def clean(self):
        named = [t for t in self.TARGETS if getattr(self, f"{t}_id")]
        if len(named) != 1:
            raise ValidationError("Choose exactly one SKU or option for this item.")


RESALE_HELP = "+25 charges customers 25 % over your cost; −5 sells 5 % under it."


class ResalePriceList(models.Model):
    """What a reseller charges its customers: a markup (or discount) in percent on its own cost
    (its PriceList applied to the list prices), one for everything and one per SKU or storage
    provider; for every customer (``customer`` empty) or for one customer, which then has its
    own. A SKU's markup covers its whole server (the server and its per-node NVMe and network),
    as the usage ledger meters it; storage is metered and marked up on its own. Only what the
    reseller's customers see of their usage changes: the reseller is invoiced at its cost."""

    reseller = models.ForeignKey("accounts.Organisation", on_delete=models.CASCADE,
                                 related_name="resale_price_lists", limit_choices_to={"kind": "reseller"})
    customer = models.ForeignKey("accounts.Organisation", null=True, blank=True,
                                 on_delete=models.CASCADE, related_name="resale_price_list_as_customer",
                                 help_text="Empty: every customer without its own prices.")
    percent = models.DecimalField("everything else (%)", max_digits=5, decimal_places=2, default=0,
                                  validators=PERCENT_VALIDATORS, help_text=RESALE_HELP)
    updated_at = models.DateTimeField(auto_now=True)
    updated_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
                                   related_name="+")

    class Meta:
        ordering = ["reseller_id", "customer_id"]
        constraints = [
            models.UniqueConstraint(fields=["reseller"], condition=Q(customer__isnull=True),
                                    name="one_default_resale_list_per_reseller"),
            models.UniqueConstraint(fields=["reseller", "customer"], condition=Q(customer__isnull=False),
                                    name="one_resale_list_per_customer"),
        ]

    def __str__(self) -> str:
        return f"Resale prices of {self.reseller} for {self.customer or 'every customer'}"


RESALE_TARGETS = ("sku", "storage")


class ResalePriceItem(models.Model):
    """A markup on one SKU (its whole server) or one storage provider (exactly one of them)."""

    TARGETS = RESALE_TARGETS

    resale_list = models.ForeignKey(ResalePriceList, on_delete=models.CASCADE, related_name="items")
    sku = models.ForeignKey(ServerSKU, null=True, blank=True, on_delete=models.CASCADE, related_name="+")
    storage = models.ForeignKey(StorageProvider, null=True, blank=True, on_delete=models.CASCADE,
                                related_name="+")
    percent = models.DecimalField("markup (%)", max_digits=5, decimal_places=2,
                                  validators=PERCENT_VALIDATORS, help_text=RESALE_HELP)

    class Meta:
        constraints = [
            models.CheckConstraint(condition=Q(sku__isnull=False, storage__isnull=True)
                                   | Q(sku__isnull=True, storage__isnull=False),
                                   name="resale_item_names_one_target"),
            models.UniqueConstraint(fields=["resale_list", "sku"], name="one_resale_item_per_sku"),
            models.UniqueConstraint(fields=["resale_list", "storage"], name="one_resale_item_per_storage"),
        ]

    def __str__(self) -> str:
        return f"{self.key} {self.percent:+}%"

    @property
    def key(self) -> str:
        """How the price function names the item: sku:<slug> or storage:<slug>."""
        return f"sku:{self.sku.slug}" if self.sku_id else f"storage:{self.storage.slug}"
