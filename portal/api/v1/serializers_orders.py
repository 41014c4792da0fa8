"""Input and output shapes of orders, their events and servers, quotes lists and the catalog."""

from rest_framework import serializers

from portal.accounts.models import Organisation
from portal.api.v1.fields import StrictCharField, StrictSlugField
from portal.api.v1.serializers import (
    RETENTION_HELP,
    CatalogSlugField,
    JsonObjectField,
    QuoteInputSerializer,
    RowAnswers,
    money,
    read_only,
    utc_time,
)
from portal.catalog.models import GPUModel, NetworkOption, NvmeOption, ServerSKU, StackOption, StorageProvider
from portal.core.text import VisibleText
from portal.orders.models import OrderEvent
from portal.orders.selectors import order_event_text
from portal.orders.states import OrderState
from provisioning.webhooks import customer_problems

CUSTOMER_HELP = "A reseller acts for one of its customers: the customer's slug. Default: the key's own."
FILTER_HELP = "A customer's slug (resellers); empty: every customer, as when not given."


# --- quotes -------------------------------------------------------------------------------
class QuoteCreateInputSerializer(QuoteInputSerializer):
    customer = StrictSlugField(required=False, help_text=CUSTOMER_HELP)


class QuoteListFilterSerializer(serializers.Serializer):
    customer = serializers.SlugField(required=False, allow_blank=True, help_text=FILTER_HELP)


# --- orders -------------------------------------------------------------------------------
class OrderCreateInputSerializer(serializers.Serializer):
    quote = StrictCharField(required=False, max_length=12,
                                  help_text="A quote's reference (Q-…); or give `configuration`.")
    configuration = QuoteInputSerializer(required=False,
                                         help_text="An inline configuration, priced and quoted now.")
    customer = StrictSlugField(required=False, help_text=CUSTOMER_HELP)

    def validate(self, attrs):
        if ("quote" in attrs) == ("configuration" in attrs):
            raise serializers.ValidationError(
                {"non_field_errors": ["Give either a quote reference or a configuration."]})
        return attrs


class OrderCancelInputSerializer(serializers.Serializer):
    reason = StrictCharField(required=False, allow_blank=True, max_length=500, default="")


class OrderTerminateInputSerializer(serializers.Serializer):
    note = StrictCharField(required=False, allow_blank=True, max_length=500, default="")


class OrderListFilterSerializer(serializers.Serializer):
    state = serializers.MultipleChoiceField(choices=OrderState.choices, required=False,
                                            help_text="One or more states (repeat the parameter).")
    customer = serializers.SlugField(required=False, allow_blank=True, help_text=FILTER_HELP)
    created_after = serializers.DateTimeField(required=False)
    created_before = serializers.DateTimeField(required=False)


class ChoiceLabelField(serializers.CharField):
    """The label of a choice field's value (``get_<field>_display`` for a row)."""

    def __init__(self, choices, **kwargs):
        self.labels = dict(choices)
        super().__init__(read_only=True, **kwargs)

    def to_representation(self, value) -> str:
        return str(self.labels.get(value, value))


# Serialises a row of rows.order_rows (no docstring: it would become the schema's description).
# Never failure_reason (a step's message for staff) nor the storage secret.
class OrderOutputSerializer(serializers.Serializer):
    reference = read_only(serializers.CharField)
    organisation = read_only(serializers.CharField, source="organisation__slug")
    quote = read_only(serializers.CharField, source="quote__reference", allow_null=True)
    state = read_only(serializers.ChoiceField, choices=OrderState.choices)
    state_label = ChoiceLabelField(OrderState.choices, source="state")
    target_state = read_only(serializers.ChoiceField, choices=OrderState.choices, allow_blank=True,
                        help_text="Where in-flight work takes the order; empty when none.")
    state_changed_at = utc_time()
    rejection_reason = read_only(serializers.CharField, help_text="Shown to the customer.")
    sku = CatalogSlugField("sku")
    node_count = read_only(serializers.IntegerField)
    nvme = CatalogSlugField("nvme")
    network = CatalogSlugField("network")
    storage_provider = CatalogSlugField("storage", allow_null=True)
    storage_tb = read_only(serializers.IntegerField)
    storage_retention_days = read_only(serializers.IntegerField, help_text=RETENTION_HELP)
    strategy = CatalogSlugField("stack", allow_null=True)
    tracker = CatalogSlugField("stack", allow_null=True)
    plan = read_only(JsonObjectField)
    price_hourly = money(10)
    price_monthly = money(12)
    currency = read_only(serializers.CharField)
    created_at = utc_time()
    updated_at = utc_time()


ORDER_ANSWERS = RowAnswers(OrderOutputSerializer)


class CopiedFromNodeSerializer(serializers.Serializer):
    hostname = serializers.CharField()
    files = serializers.IntegerField()
    bytes_copied = serializers.IntegerField()
    verified = serializers.BooleanField(help_text="Copied, listed from our side and checked.")
    note = serializers.CharField(help_text="e.g. nothing to copy, and why.")


class RetainedDataSerializer(serializers.Serializer):
    bucket = serializers.CharField()
    endpoint = serializers.CharField()
    region = serializers.CharField()
    provider = serializers.CharField()
    state = serializers.ChoiceField(choices=["active", "retained", "deleted"],
                                    help_text="active: the termination is still copying.")
    retain_until = serializers.DateTimeField(allow_null=True)
    copied = CopiedFromNodeSerializer(many=True)
    read_key_id = serializers.CharField(help_text="The read-only key's id; empty when none.")
    read_key_revealable = serializers.BooleanField(help_text="Its secret can still be shown once.")
    read_key_pending = serializers.BooleanField(help_text="A read-only key is being issued.")


class OrderDetailOutputSerializer(OrderOutputSerializer):
    retained_data = RetainedDataSerializer(
        allow_null=True, read_only=True,
        help_text="A terminating or terminated order's bucket: what was copied, until when it is "
                  "kept, its read-only key. Null otherwise.")


class OrderEventOutputSerializer(serializers.ModelSerializer):
    """What happened, in words a customer may read: the transition's label, never staff notes."""

    text = serializers.SerializerMethodField()
    by = serializers.SerializerMethodField()

    class Meta:
        model = OrderEvent
        fields = ["at", "transition", "from_state", "to_state", "text", "by"]
        read_only_fields = fields

    def get_text(self, event) -> str:
        return order_event_text(event)

    def get_by(self, event) -> str:
        """`api_key:<prefix>`, `staff`, `member` or `system`."""
        if event.api_key_id:
            return f"api_key:{event.api_key.prefix}"
        if event.actor_id is None:
            return "system"
        return "staff" if event.actor.is_hosting_staff else "member"

class RunOutputSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    kind = serializers.CharField()
    status = serializers.CharField()
    created_at = serializers.DateTimeField()

# --- servers ------------------------------------------------------------------------------
class NodeAccessSerializer(serializers.Serializer):
    hostname = serializers.CharField()
    rank = serializers.IntegerField()
    ssh_command = serializers.CharField()
    ssh_user = serializers.CharField(source="handover.ssh_user")
    ssh_host = serializers.CharField(source="handover.ssh_host")
    ssh_port = serializers.IntegerField(source="handover.ssh_port")
    simulated = serializers.BooleanField()
    handed_over_at = serializers.CharField(source="handover.handed_over_at")

class StorageAccessSerializer(serializers.Serializer):
    bucket = serializers.CharField()
    endpoint = serializers.CharField()
    region = serializers.CharField()
    access_key_id = serializers.CharField()
    provider = serializers.CharField()
    state = serializers.CharField(help_text="active, retained (after termination) or deleted.")
    retain_until = serializers.DateTimeField(allow_null=True,
                                             help_text="A retained bucket is deleted after this.")
    secret_revealable = serializers.BooleanField(
        help_text="The key's secret has not been shown yet: POST …/server/storage/reveal.")

class StorageSecretSerializer(serializers.Serializer):
    bucket = serializers.CharField()
    endpoint = serializers.CharField()
    region = serializers.CharField()
    access_key_id = serializers.CharField()
    secret_access_key = serializers.CharField(help_text="Shown only now.")
    credentials_file = serializers.CharField(help_text="A ready ~/.aws/credentials block and the "
                                                       "AWS_ENDPOINT_URL line.")

class StackFileSerializer(serializers.Serializer):
    name = serializers.CharField()
    path = serializers.CharField(help_text="Where it lives on the node.")
    sha256 = serializers.CharField()
    url = serializers.CharField(help_text="Download it here (the same API key).")

class NodeStackFilesSerializer(serializers.Serializer):
    hostname = serializers.CharField()
    rank = serializers.IntegerField()
    files = StackFileSerializer(many=True)

class AcceptanceCheckSerializer(serializers.Serializer):
    name = serializers.CharField()
    ok = serializers.BooleanField()
    detail = serializers.CharField()
    status = serializers.CharField(source="outcome", help_text="pass, fail or skip (reason in detail).")
    node = serializers.CharField(help_text="The node that ran it; empty for the training job.")
    value = serializers.FloatField(allow_null=True)
    threshold = serializers.FloatField(allow_null=True)
    unit = serializers.CharField()

class CheckpointRoundTripSerializer(serializers.Serializer):
    ok = serializers.BooleanField()
    bucket = serializers.BooleanField(help_text="False: no bucket ordered; saved and loaded on the node.")
    prefix = serializers.CharField()
    bytes = serializers.IntegerField()
    tensors = serializers.IntegerField()
    mismatched = serializers.IntegerField()
    upload_mib_per_s = serializers.FloatField(allow_null=True)
    download_mib_per_s = serializers.FloatField(allow_null=True)

class AcceptanceReportSerializer(serializers.Serializer):
    """On a cluster ``checks`` holds the training job's checks and every node's own checks
    (``node`` names it)."""

    passed = serializers.BooleanField()
    checks = AcceptanceCheckSerializer(many=True)
    gpu_count = serializers.IntegerField()
    expected_gpu_count = serializers.IntegerField()
    max_temperature_c = serializers.FloatField(allow_null=True)
    ecc_errors = serializers.IntegerField()
    simulated = serializers.BooleanField(help_text="True: the simulated driver answered; no job ran.")
    test_host = serializers.BooleanField()
    nodes = serializers.IntegerField()
    world_size = serializers.IntegerField()
    device = serializers.CharField()
    autocast = serializers.CharField()
    parameters = serializers.IntegerField()
    versions = serializers.DictField(child=serializers.CharField())
    ddp_losses = serializers.ListField(child=serializers.FloatField())
    fsdp_losses = serializers.ListField(child=serializers.FloatField())
    tokens_per_s = serializers.DictField(child=serializers.FloatField())
    allreduce_busbw_gbps = serializers.FloatField(allow_null=True)
    peak_memory_bytes = serializers.IntegerField(
        allow_null=True, help_text="The training job's largest torch.cuda.max_memory_allocated "
                                   "over its GPUs; null on a CPU test host.")
    checkpoint = CheckpointRoundTripSerializer(allow_null=True)

class HealthOutputSerializer(serializers.Serializer):
    hostname = serializers.CharField(source="node.hostname")
    at = serializers.DateTimeField()
    ok = serializers.BooleanField()
    gpu_count = serializers.IntegerField(allow_null=True)
    expected_gpu_count = serializers.IntegerField()
    max_temperature_c = serializers.DecimalField(max_digits=5, decimal_places=1, allow_null=True)
    ecc_errors = serializers.IntegerField(allow_null=True)
    problems = serializers.SerializerMethodField(help_text="What is wrong, in words for customers.")

    def get_problems(self, check) -> list[str]:
        return customer_problems(check.problems)

class ServerOutputSerializer(serializers.Serializer):
    order = serializers.CharField()
    state = serializers.CharField()
    nodes = NodeAccessSerializer(many=True)
    storage = StorageAccessSerializer(allow_null=True)
    acceptance = AcceptanceReportSerializer(allow_null=True)
    health = HealthOutputSerializer(many=True)

# --- catalog ------------------------------------------------------------------------------
class GPUOutputSerializer(serializers.ModelSerializer):
    class Meta:
        model = GPUModel
        fields = ["slug", "name", "arch", "form_factor", "memory_gb", "memory_type",
                  "memory_bandwidth_gbps", "fp32_tflops", "bf16_tflops", "fp8_tflops", "nvlink_gbps",
                  "pcie_gen", "tdp_w"]

class PaidPriceField(serializers.DecimalField):
    """A catalog price as the requesting organisation pays it: the price list in the
    serializer's context (``price_list``) applied, as the one price function applies it."""

    def __init__(self, kind: str, **kwargs):
        self.kind = kind
        super().__init__(max_digits=12, decimal_places=2, read_only=True, **kwargs)

    def get_attribute(self, instance):
        price = super().get_attribute(instance)
        price_list = self.context.get("price_list")
        return price if price_list is None else price_list.unit(f"{self.kind}:{instance.slug}", price)

PAID = "As your organisation pays it (its price list applied; USD)."

class SKUOutputSerializer(serializers.ModelSerializer):
    gpu = serializers.SlugRelatedField(slug_field="slug", read_only=True)
    price_hourly = PaidPriceField("sku", help_text=PAID)
    price_monthly = PaidPriceField("sku", help_text=PAID)
    stock = serializers.IntegerField(read_only=True, default=0, help_text="Ready nodes now.")

    class Meta:
        model = ServerSKU
        fields = ["slug", "name", "gpu", "gpu_count", "interconnect", "cpu_cores", "ram_gb",
                  "price_hourly", "price_monthly", "approval_policy", "stock"]

class NvmeOutputSerializer(serializers.ModelSerializer):
    price_monthly = PaidPriceField("nvme", help_text=PAID)

    class Meta:
        model = NvmeOption
        fields = ["slug", "size_tb", "drives", "raid", "price_monthly"]

class NetworkOutputSerializer(serializers.ModelSerializer):
    price_monthly = PaidPriceField("network", help_text=PAID)

    class Meta:
        model = NetworkOption
        fields = ["slug", "name", "kind", "speed_gbps", "on_request", "is_default", "price_monthly"]

class StorageOutputSerializer(serializers.ModelSerializer):
    price_per_tb_monthly = PaidPriceField("storage", help_text=PAID)

    class Meta:
        model = StorageProvider
        fields = ["slug", "name", "kind", "region", "price_per_tb_monthly"]

class StackOutputSerializer(serializers.ModelSerializer):
    class Meta:
        model = StackOption
        fields = ["slug", "name", "kind"]

class CatalogOutputSerializer(serializers.Serializer):
    currency = serializers.CharField()
    gpus = GPUOutputSerializer(many=True)
    skus = SKUOutputSerializer(many=True)
    nvme = NvmeOutputSerializer(many=True)
    networks = NetworkOutputSerializer(many=True)
    storage = StorageOutputSerializer(many=True)
    stack = StackOutputSerializer(many=True)

# --- customers ----------------------------------------------------------------------------
class CustomerInputSerializer(serializers.Serializer):
    name = StrictCharField(max_length=200, validators=[VisibleText()])
    slug = StrictSlugField(required=False, max_length=50,
                                 help_text="Default: made from the name. Unique across Trainyard.")

class CustomerUpdateSerializer(serializers.Serializer):
    name = StrictCharField(max_length=200, validators=[VisibleText()])

class CustomerOutputSerializer(serializers.ModelSerializer):
    class Meta:
        model = Organisation
        fields = ["slug", "name", "created_at"]
        read_only_fields = fields
