"""Input and output shapes of /api/v1/ (sizing and quotes)."""

import datetime
import json
from functools import partial

from django.utils import timezone
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers
from rest_framework.fields import SkipField

from portal.api.v1.fields import StrictBooleanField, StrictCharField
from portal.catalog.cache import catalog_name
from portal.catalog.models import NetworkOption, NvmeOption, ServerSKU, StackOption, StorageProvider
from portal.quotes.configuration import Configuration, CustomStorage
from portal.quotes.models import StorageChoice
from portal.quotes.plans import plan_check, plan_nvme_tb
from portal.quotes.rules import (
    MAX_NODES,
    MAX_RETENTION_DAYS,
    MAX_STORAGE_TB,
    MIN_RETENTION_DAYS,
    pick_network,
    pick_nvme,
    stack_message,
)
from portal.quotes.selectors import strategy_stacks
from portal.sizing import services
from portal.sizing.estimator import config as est_config
from portal.sizing.forms import BYTES_PER_TOKEN_GUESS, WizardForm, parse_count
from portal.sizing.recommend import Goal, SearchOptions, Workload
from portal.sizing.recommend import types as rec_types

RETENTION_HELP = StorageChoice._meta.get_field("storage_retention_days").help_text


# --- Quotes -------------------------------------------------------------------------------
class CustomStorageInputSerializer(serializers.Serializer):
    endpoint_url = serializers.URLField(help_text="Your S3 endpoint, e.g. https://s3.example.com")
    bucket = StrictCharField(max_length=63)
    access_key_id = StrictCharField(max_length=128)
    secret_key = StrictCharField(max_length=256, write_only=True)


class QuoteInputSerializer(serializers.Serializer):
    sku = serializers.SlugRelatedField(slug_field="slug", queryset=ServerSKU.objects.filter(is_active=True),
                                       help_text="Server SKU slug, e.g. `8x-h100-sxm-80gb`.")
    node_count = serializers.IntegerField(min_value=1, max_value=MAX_NODES, default=1)
    nvme = serializers.SlugRelatedField(slug_field="slug", queryset=NvmeOption.objects.all(),
                                        required=False, help_text="NVMe option slug; default the smallest.")
    network = serializers.SlugRelatedField(
        slug_field="slug", queryset=NetworkOption.objects.all(), required=False,
        help_text="Network option slug; default the cheapest one allowed for the node count.")
    storage_provider = serializers.SlugRelatedField(slug_field="slug", queryset=StorageProvider.objects.all(),
                                                    required=False, allow_null=True)
    storage_tb = serializers.IntegerField(min_value=0, max_value=MAX_STORAGE_TB, default=0)
    storage_retention_days = serializers.IntegerField(
        min_value=MIN_RETENTION_DAYS, max_value=MAX_RETENTION_DAYS, required=False,
        help_text="Days the bucket is kept after termination; default STORAGE_RETENTION_DAYS.")
    storage_custom = CustomStorageInputSerializer(
        required=False, allow_null=True,
        help_text="Your own bucket (storage_provider of kind custom, e.g. `custom-s3`); the keys are "
                  "stored encrypted and never returned.")
    strategy = serializers.SlugRelatedField(slug_field="slug", required=False, allow_null=True,
                                            queryset=StackOption.objects.filter(kind="strategy"))
    tracker = serializers.SlugRelatedField(slug_field="slug", required=False, allow_null=True,
                                           queryset=StackOption.objects.filter(kind="tracker"))
    plan = serializers.DictField(required=False, default=dict,
                                 help_text="A plan from POST /api/v1/recommendations, stored with the quote.")

    def validate_plan(self, value):
        try:
            return plan_check(value)
        except ValueError as exc:
            raise serializers.ValidationError(str(exc)) from None

    def validate(self, attrs):
        problem = stack_message(attrs.get("strategy"), attrs.get("plan"), strategy_stacks())
        if problem is not None:
            raise serializers.ValidationError({problem.field: [problem.text]})
        return attrs

    def configuration(self) -> Configuration:
        d = self.validated_data
        nodes = d["node_count"]
        nvme = d.get("nvme") or pick_nvme(NvmeOption.objects.all(), plan_nvme_tb(d["plan"]))
        network = d.get("network") or pick_network(NetworkOption.objects.all(), nodes=nodes)
        return Configuration(
            sku=d["sku"], node_count=nodes, nvme=nvme, network=network,
            storage_provider=d.get("storage_provider"), storage_tb=d["storage_tb"],
            strategy=d.get("strategy"), tracker=d.get("tracker"),
            storage_retention_days=d.get("storage_retention_days"),
            custom_storage=CustomStorage(**d["storage_custom"]) if d.get("storage_custom") else None)


# The configurator's rules name the form's fields; the API's custom bucket is `storage_custom`.
CUSTOM_STORAGE_FIELDS = {"storage_endpoint_url": "endpoint_url", "storage_bucket": "bucket",
                         "storage_access_key_id": "access_key_id"}


def rule_errors(problems) -> dict:
    """A configuration's broken rules as the API's errors, by the field of the request."""
    errors: dict = {}
    for p in problems:
        if p.field in CUSTOM_STORAGE_FIELDS:
            errors.setdefault("storage_custom", {})[CUSTOM_STORAGE_FIELDS[p.field]] = [p.text]
        else:
            errors.setdefault(p.field, []).append(p.text)
    return errors


class UtcDateTimeField(serializers.DateTimeField):
    """A time as ISO 8601 in UTC (`…Z`): the API's times are UTC whatever zone is active."""

    def __init__(self, **kwargs):
        kwargs.setdefault("default_timezone", datetime.UTC)
        super().__init__(**kwargs)


def read_only(field_class, **kwargs):
    """A field of an output row (every output field is read-only)."""
    return field_class(read_only=True, **kwargs)


def utc_time(**kwargs) -> serializers.DateTimeField:
    """A time as ISO 8601 in UTC (`…Z`) whatever zone is active."""
    return read_only(UtcDateTimeField, **kwargs)


class RowAnswers:
    """Rows as an output serializer of plain rows answers them, from one instance of it: DRF
    builds a serializer's fields anew for every instance (a deep copy of every declared field,
    about as long as answering ten rows). Only for serializers whose fields read nothing but
    the row (no context, no request), so one instance can serve every request and thread.

    ``one`` is DRF's ``Serializer.to_representation`` with the field list walked once up front:
    a field that reads its value the default way from a one-part source (``Field.get_attribute``)
    reads ``row[source]``; any other, and a row without that key, goes through the field's own
    ``get_attribute`` (DRF's rules: a default, null, or the field left out). A row's values are
    plain (``values()``): never a callable DRF would call. Serializers that override
    ``to_representation`` or hold related fields are refused."""

    def __init__(self, serializer_class: type[serializers.Serializer]) -> None:
        if serializer_class.to_representation is not serializers.Serializer.to_representation:
            raise TypeError(f"{serializer_class.__name__}: overrides to_representation, which rows skip")
        self.serializer = serializer_class()
        readable = [f for f in self.serializer.fields.values() if not f.write_only]
        if any(isinstance(f, (serializers.RelatedField, serializers.ManyRelatedField)) for f in readable):
            raise TypeError(f"{serializer_class.__name__}: a row holds no related objects")
        self.fields = tuple((f.field_name, f.source_attrs[0] if _reads_a_key(f) else None, f)
                            for f in readable)

    def one(self, row: dict) -> dict:
        answer = {}
        for name, key, field in self.fields:
            if key is not None and key in row:
                value = row[key]
            else:
                try:
                    value = field.get_attribute(row)
                except SkipField:
                    continue
            answer[name] = None if value is None else field.to_representation(value)
        return answer

    def many(self, rows) -> list[dict]:
        return [self.one(row) for row in rows]


def _reads_a_key(field: serializers.Field) -> bool:
    return type(field).get_attribute is serializers.Field.get_attribute and len(field.source_attrs) == 1


def money(max_digits: int) -> serializers.DecimalField:
    return read_only(serializers.DecimalField, max_digits=max_digits, decimal_places=2)


@extend_schema_field({"type": "object", "additionalProperties": {}})
class JsonObjectField(serializers.JSONField):
    """A stored JSON object answered as it is (a sizing plan): no per-key field to walk."""


class CatalogSlugField(serializers.CharField):
    """A catalog row's slug (``part=1``: its name), looked up by the row's id (``<source>_id`` of
    a row from ``rows.quote_rows`` / ``rows.order_rows``) in the catalog this process keeps
    (``portal.catalog.cache``): a quote or an order is read without joining five catalog tables."""

    def __init__(self, kind: str, *, part: int = 0, **kwargs):
        self.kind, self.part = kind, part
        super().__init__(read_only=True, **kwargs)

    def get_attribute(self, instance):
        return catalog_name(self.kind, instance[f"{self.source}_id"], self.part)


class PriceLineSerializer(serializers.Serializer):
    label = serializers.CharField()
    hourly = serializers.DecimalField(max_digits=12, decimal_places=2)
    monthly = serializers.DecimalField(max_digits=12, decimal_places=2)


class StillValidField(serializers.BooleanField):
    """Whether a quote can still be ordered: now is before its ``valid_until``."""

    def __init__(self, **kwargs):
        super().__init__(source="valid_until", read_only=True, **kwargs)

    def to_representation(self, value) -> bool:
        return timezone.now() < value


# Serialises a row of rows.quote_rows: a plain Serializer with its fields declared (no model
# introspection per answer). No docstring: it would become the schema's description.
class QuoteOutputSerializer(serializers.Serializer):
    reference = read_only(serializers.CharField)
    organisation = read_only(serializers.CharField, source="organisation__slug")
    sku = CatalogSlugField("sku")
    sku_name = CatalogSlugField("sku", part=1, source="sku")
    node_count = read_only(serializers.IntegerField)
    nvme = CatalogSlugField("nvme")
    network = CatalogSlugField("network")
    storage_provider = CatalogSlugField("storage", allow_null=True)
    storage_tb = read_only(serializers.IntegerField)
    storage_retention_days = read_only(serializers.IntegerField, help_text=RETENTION_HELP)
    storage_endpoint_url = read_only(serializers.CharField,
                                     help_text="Custom S3 endpoint only; empty otherwise.")
    storage_bucket = read_only(serializers.CharField, help_text="Custom S3 bucket only.")
    strategy = CatalogSlugField("stack", allow_null=True)
    tracker = CatalogSlugField("stack", allow_null=True)
    plan = read_only(JsonObjectField)
    price_lines = PriceLineSerializer(many=True, read_only=True)
    price_hourly = money(10)
    price_monthly = money(12)
    currency = read_only(serializers.CharField)
    valid_until = utc_time()
    is_valid = StillValidField()
    created_at = utc_time()


QUOTE_ANSWERS = RowAnswers(QuoteOutputSerializer)


# --- Sizing: inputs -------------------------------------------------------------------------
# The API's defaults are the wizard's (one source: the wizard form's initial values), so a
# request naming only the model asks what the wizard's first results page answers.
WIZARD = WizardForm.base_fields


def _wizard(name: str):
    return WIZARD[name].initial


WIZARD_GOAL = _wizard("goal")
WIZARD_BATCH_SEQUENCES = _wizard("global_batch_seqs")


class ModelInputMixin(serializers.Serializer):
    model = StrictCharField(required=False, help_text="A preset name, e.g. `llama-3.1-8b`.")
    hf_config = serializers.DictField(required=False,
                                      help_text="Or the contents of a Hugging Face config.json.")

    def validate(self, attrs):
        if ("model" in attrs) == ("hf_config" in attrs):
            raise serializers.ValidationError({"model": ["Give either a preset name or an hf_config."]})
        if attrs.get("hf_config") == {}:
            raise serializers.ValidationError({"hf_config": ["An empty config describes no model."]})
        return attrs

    def model_spec(self):
        d = self.validated_data
        try:
            if d.get("model"):
                return services.model_from_preset(d["model"]).spec
            return services.model_from_config_text(_json(d["hf_config"])).spec
        except services.ModelSourceError as exc:
            field = "hf_config" if d.get("hf_config") else "model"
            raise serializers.ValidationError({field: [str(exc)]}) from None


def _json(value) -> str:
    return json.dumps(value)


def limited(name: str, *, number=serializers.IntegerField, **kwargs):
    """A numeric field whose range is the sizing layer's (``estimator.config.LIMITS``): out of
    range is a 400 naming the field and the bound."""
    low, high = est_config.LIMITS[name]
    return number(min_value=low, max_value=high, **kwargs)


class ExactFloatField(serializers.FloatField):
    """A JSON number (not a string of one, as the schema says) whose bounds hold for the number as
    sent: 10**18 + 1 is above a maximum of 10**18, although as a float it is 1e18."""

    def to_internal_value(self, data):
        if isinstance(data, bool) or not isinstance(data, int | float):
            self.fail("invalid")
        value = super().to_internal_value(data)
        if isinstance(data, int) and self.max_value is not None and data > self.max_value:
            self.fail("max_value", max_value=self.max_value)
        return value


def tokens(**kwargs):
    """A count of tokens or bytes: 0 to MAX_TOKENS."""
    return serializers.IntegerField(min_value=0, max_value=rec_types.MAX_TOKENS, **kwargs)


DORA_HELP = ("PEFT's DoRA (LoraConfig.use_dora) on the LoRA adapters: finetune 'lora' only, on the dense"
             " llama family's linears; it is sized and timed, and the stacks render it.")


class TrainingInputSerializer(serializers.Serializer):
    """Where the wizard asks the same question, its default (``_wizard``)."""

    precision = serializers.ChoiceField(choices=est_config.PRECISIONS, default=_wizard("precision"))
    optimizer = serializers.ChoiceField(choices=est_config.OPTIMIZERS, default=_wizard("optimizer"))
    micro_batch = limited("micro_batch", default=1)
    seq_len = limited("seq_len", default=_wizard("seq_len"))
    grad_accum = limited("grad_accum", default=1)
    checkpointing = serializers.ChoiceField(choices=est_config.CHECKPOINTING, default="none")
    attention = serializers.ChoiceField(choices=est_config.ATTENTION, default="sdpa")
    finetune = serializers.ChoiceField(choices=est_config.FINETUNE, default=_wizard("finetune"))
    lora_rank = limited("lora_rank", default=_wizard("lora_rank"))
    use_dora = StrictBooleanField(default=False, help_text=DORA_HELP)
    quant_storage = serializers.ChoiceField(
        choices=est_config.QUANT_STORAGES, default="auto",
        help_text="QLoRA: bitsandbytes' bnb_4bit_quant_storage; a half type lets FSDP and ZeRO-3 shard the"
                  " 4-bit weights (auto: the half type under weight sharding, as the stacks render it).")


class ParallelInputSerializer(serializers.Serializer):
    dp = limited("dp", default=1)
    sharding = serializers.ChoiceField(choices=est_config.SHARDING, default="none")
    offload = serializers.ChoiceField(choices=est_config.OFFLOAD, default="none")
    tp = limited("tp", default=1)
    sp = StrictBooleanField(default=False)
    pp = limited("pp", default=1)
    ep = limited("ep", default=1)


class EstimateInputSerializer(ModelInputMixin):
    training = TrainingInputSerializer(required=False)
    parallel = ParallelInputSerializer(required=False)
    gpu = StrictCharField(required=False, help_text="Catalog GPU slug: makes the estimate timed.")
    sku = StrictCharField(required=False, help_text="Catalog SKU slug: sets GPU and links.")
    network = StrictCharField(required=False, help_text="Network option slug between nodes.")
    train_tokens = ExactFloatField(required=False, min_value=0, max_value=rec_types.MAX_TOKENS)
    plan = serializers.DictField(
        required=False, help_text="Or a stored plan (with schema_version, as POST /api/v1/recommendations "
                                  "returned it, or a quote's plan): re-estimated on its own model, settings "
                                  "and layout, timed on its SKU and network.")

    def validate(self, attrs):
        if "plan" not in attrs:
            return super().validate(attrs)
        others = sorted(set(attrs) & {"model", "hf_config", "training", "parallel", "gpu", "sku", "network",
                                      "train_tokens"})
        if others:
            raise serializers.ValidationError(
                {"plan": [f"A plan carries its own model and settings; send the plan alone, without "
                          f"{', '.join(others)}."]})
        return attrs


class GoalInputSerializer(serializers.Serializer):
    kind = serializers.ChoiceField(choices=rec_types.GOALS, default=WIZARD_GOAL)
    deadline_hours = limited("deadline_hours", number=serializers.FloatField, required=False)
    budget_usd = limited("budget_usd", number=partial(serializers.DecimalField, max_digits=None,
                                                       decimal_places=None, coerce_to_string=False),
                         required=False)  # money: a Decimal of the number as written


SHORTHAND_GOALS = ("fastest", "cheapest")


@extend_schema_field({"oneOf": [
    {"type": "string", "enum": list(SHORTHAND_GOALS),
     "description": "Shorthand for {\"kind\": \"fastest\"} or {\"kind\": \"cheapest\"}."},
    {"type": "object", "properties": {
        "kind": {"type": "string", "enum": list(rec_types.GOALS), "default": WIZARD_GOAL},
        "deadline_hours": {"type": "number", "minimum": 0,
                           "maximum": est_config.LIMITS["deadline_hours"][1]},
        "budget_usd": {"type": "number", "minimum": 0, "maximum": est_config.LIMITS["budget_usd"][1]}}}]})
class GoalField(serializers.Field):
    """`goal`: a string for the goals that need no number, or the object."""

    def to_internal_value(self, data):
        if isinstance(data, str):
            if data not in SHORTHAND_GOALS:
                needs = {"deadline": "deadline_hours", "budget": "budget_usd"}.get(data)
                hint = (f' Give {{"kind": "{data}", "{needs}": …}}.' if needs
                        else f" Use {' or '.join(SHORTHAND_GOALS)}, or an object.")
                raise serializers.ValidationError(f"Goal {data!r} is not a shorthand.{hint}")
            data = {"kind": data}
        goal = GoalInputSerializer(data=data)
        goal.is_valid(raise_exception=True)
        return goal.validated_data


class SearchInputSerializer(serializers.Serializer):
    # Bounded so one request cannot make the search arbitrarily slow.
    node_counts = serializers.ListField(child=serializers.IntegerField(min_value=1, max_value=32),
                                        max_length=6, required=False)
    tp_sizes = serializers.ListField(child=serializers.IntegerField(min_value=1, max_value=8),
                                     max_length=4, required=False)
    pp_sizes = serializers.ListField(child=serializers.IntegerField(min_value=1, max_value=16),
                                     max_length=5, required=False)
    checkpointing = serializers.ListField(child=serializers.ChoiceField(choices=rec_types.CHECKPOINTING),
                                         required=False)
    strategies = serializers.ListField(child=StrictCharField(), max_length=20, required=False)
    top_n = serializers.IntegerField(min_value=1, max_value=20, default=5)


class RecommendationInputSerializer(ModelInputMixin):
    dataset_tokens = tokens(default=parse_count(_wizard("dataset_tokens")),
                            help_text="Default: the wizard's, 500M.")
    dataset_bytes = tokens(
        required=False,
        help_text=f"Default: about {BYTES_PER_TOKEN_GUESS} bytes per token, as the wizard assumes.")
    dataset_files = limited("dataset_files", default=_wizard("dataset_files"))
    finetune = serializers.ChoiceField(choices=rec_types.FINETUNES, default=_wizard("finetune"))
    precision = serializers.ChoiceField(choices=rec_types.PRECISIONS, default=_wizard("precision"))
    optimizer = serializers.ChoiceField(choices=est_config.OPTIMIZERS, default=_wizard("optimizer"))
    seq_len = limited("seq_len", default=_wizard("seq_len"))
    global_batch_tokens = limited(
        "global_batch_tokens", required=False,
        help_text=f"Tokens per optimizer step. Default: {WIZARD_BATCH_SEQUENCES} sequences of "
                  f"seq_len, as in the wizard.")
    epochs = limited("epochs", number=serializers.FloatField, default=float(_wizard("epochs")))
    train_tokens = tokens(default=0)
    lora_rank = limited("lora_rank", default=_wizard("lora_rank"))
    use_dora = StrictBooleanField(default=False, help_text=DORA_HELP)
    goal = GoalField(required=False,
                     help_text=f'"fastest", "cheapest", or {{"kind": …, "deadline_hours" | "budget_usd": '
                               f'…}}; default {WIZARD_GOAL}, as in the wizard.')
    options = SearchInputSerializer(required=False)

    def request(self) -> tuple[Workload, Goal, SearchOptions]:
        """What to ask the recommender (ValueError for values the dataclasses refuse)."""
        d = dict(self.validated_data)
        goal, options = d.pop("goal", {"kind": WIZARD_GOAL}), d.pop("options", {})
        d.pop("hf_config", None)
        d.pop("model", None)
        d.setdefault("dataset_bytes", d["dataset_tokens"] * BYTES_PER_TOKEN_GUESS)
        d.setdefault("global_batch_tokens", WIZARD_BATCH_SEQUENCES * d["seq_len"])
        options = {k: tuple(v) if isinstance(v, list) else v for k, v in options.items()}
        return (Workload(model=self.model_spec(), **d), Goal(**goal), SearchOptions(**options))


# --- Sizing: outputs (documentation of the pure modules' to_dict()) ------------------------
class ParamCountsSerializer(serializers.Serializer):
    total = serializers.IntegerField()
    trainable = serializers.IntegerField()
    active = serializers.IntegerField()


class MemoryBytesSerializer(serializers.Serializer):
    weights = serializers.IntegerField()
    gradients = serializers.IntegerField()
    optimizer_states = serializers.IntegerField()
    activations = serializers.IntegerField()
    logits_and_loss = serializers.IntegerField()
    transient = serializers.IntegerField()
    gathered_buffers = serializers.IntegerField()
    framework_overhead = serializers.IntegerField()
    total = serializers.IntegerField()


class ComputeSerializer(serializers.Serializer):
    model_flops_per_token = serializers.FloatField()
    hardware_flops_per_token = serializers.FloatField()
    tokens_per_step = serializers.IntegerField()
    compute_seconds = serializers.FloatField()
    comm_bytes = serializers.DictField(child=serializers.FloatField())
    comm_seconds = serializers.DictField(child=serializers.FloatField())
    exposed_comm_seconds = serializers.FloatField(
        help_text="Seconds a step waits on communication: the traffic not hidden, CPU offload, and what the"
                  " hidden traffic slows the compute under it.")
    bubble_fraction = serializers.FloatField()
    step_seconds = serializers.FloatField()
    tokens_per_second = serializers.FloatField()
    mfu = serializers.FloatField()
    train_tokens = serializers.FloatField(allow_null=True)
    time_to_train_seconds = serializers.FloatField(allow_null=True)
    memory_bound_seconds = serializers.FloatField(
        help_text="Part of compute_seconds: memory-bound attention scores (eager attention), loss, ring"
                  " attention's merges and DoRA's weight norm and output scaling")
    comm_latency_seconds = serializers.DictField(
        child=serializers.FloatField(), required=False,
        help_text="Part of comm_seconds, by kind: the latency of the collectives launched (NCCL's model)")


class CheckpointSerializer(serializers.Serializer):
    model_only_bytes = serializers.IntegerField()
    full_state_bytes = serializers.IntegerField()


class EstimateOutputSerializer(serializers.Serializer):
    model = serializers.CharField()
    params = ParamCountsSerializer()
    per_gpu_bytes = MemoryBytesSerializer()
    cpu_bytes = serializers.IntegerField()
    fits = serializers.BooleanField(allow_null=True)
    layout = serializers.CharField()
    compute = ComputeSerializer(allow_null=True)
    checkpoint = CheckpointSerializer()
    world_size = serializers.IntegerField()
    represents = serializers.ListField(child=serializers.CharField(),
                                       help_text="The regime the estimate models, knob by knob.")
    unmodelled = serializers.ListField(child=serializers.CharField(),
                                       help_text="Settings of this layout the estimator cannot represent and "
                                                 "approximates (empty: none).")
    plan_estimator_version = serializers.IntegerField(
        required=False, help_text="A stored plan's re-estimate: the estimator model version that sized it.")
    estimator_version = serializers.IntegerField(
        required=False, help_text="A stored plan's re-estimate: today's estimator model version.")
    from_older_model = serializers.BooleanField(
        required=False, help_text="A stored plan's re-estimate: the plan was sized by an older estimator"
                                  " model, so its bytes and times may differ from these.")


class PlanOutputSerializer(serializers.Serializer):
    schema_version = serializers.IntegerField(help_text="Plan format version; plans without it are "
                                                        "unversioned and cannot be re-estimated.")
    model = serializers.CharField()
    model_spec = serializers.DictField(help_text="The model's architecture numbers (rebuilds its config).")
    finetune = serializers.CharField()
    precision = serializers.CharField()
    optimizer = serializers.CharField()
    attention = serializers.CharField()
    lora_rank = serializers.IntegerField()
    seq_len = serializers.IntegerField()
    global_batch_tokens = serializers.IntegerField()
    train_tokens = serializers.IntegerField()
    sku = serializers.CharField()
    sku_name = serializers.CharField()
    gpu = serializers.CharField()
    gpu_name = serializers.CharField()
    gpus_per_node = serializers.IntegerField()
    nodes = serializers.IntegerField()
    gpus = serializers.IntegerField()
    interconnect = serializers.CharField()
    network = serializers.CharField()
    strategy = serializers.CharField()
    sharding = serializers.CharField()
    offload = serializers.CharField()
    tp = serializers.IntegerField()
    pp = serializers.IntegerField()
    dp = serializers.IntegerField()
    ep = serializers.IntegerField()
    micro_batch = serializers.IntegerField()
    grad_accum = serializers.IntegerField()
    checkpointing = serializers.CharField()
    per_gpu_total_bytes = serializers.IntegerField()
    gpu_memory_bytes = serializers.IntegerField()
    usable_memory_bytes = serializers.IntegerField()
    memory_breakdown_bytes = serializers.DictField(child=serializers.IntegerField())
    tokens_per_second = serializers.FloatField()
    train_hours = serializers.FloatField()
    price_hourly_usd = serializers.FloatField()
    price_total_usd = serializers.FloatField()
    nvme_option = serializers.CharField()
    nvme_tb = serializers.FloatField()
    raid = serializers.CharField()
    storage_provider = serializers.CharField()
    storage_tb = serializers.FloatField()
    stack = serializers.CharField()
    stack_name = serializers.CharField()
    stack_settings = serializers.DictField()
    warnings = serializers.ListField(child=serializers.CharField())
    represents = serializers.ListField(child=serializers.CharField(), required=False,
                                       help_text="The regime the plan was sized and timed in (its stack's).")
    unmodelled = serializers.ListField(child=serializers.CharField(), required=False,
                                       help_text="Always empty: layouts the estimator cannot represent are "
                                                 "not proposed.")


class PointOutputSerializer(serializers.Serializer):
    sku = serializers.CharField()
    gpu = serializers.CharField()
    nodes = serializers.IntegerField()
    strategy = serializers.CharField()
    train_hours = serializers.FloatField()
    price_total_usd = serializers.FloatField()
    per_gpu_total_bytes = serializers.IntegerField()
    pareto = serializers.BooleanField()


class RejectionOutputSerializer(serializers.Serializer):
    sku = serializers.CharField()
    nodes = serializers.IntegerField()
    gpus = serializers.IntegerField()
    needed_bytes = serializers.IntegerField()
    usable_bytes = serializers.IntegerField()
    strategy = serializers.CharField()
    message = serializers.CharField()


class GoalOutputSerializer(serializers.Serializer):
    kind = serializers.ChoiceField(choices=rec_types.GOALS)
    deadline_hours = serializers.FloatField(allow_null=True)
    budget_usd = serializers.FloatField(allow_null=True)


class RecommendationOutputSerializer(serializers.Serializer):
    goal = GoalOutputSerializer()
    goal_met = serializers.BooleanField()
    plans = PlanOutputSerializer(many=True)
    explanations = serializers.ListField(child=serializers.CharField())
    alternatives = serializers.ListField(child=serializers.CharField())
    rejections = RejectionOutputSerializer(many=True)
    points = PointOutputSerializer(many=True)
    data = serializers.DictField(allow_null=True)
    warnings = serializers.ListField(child=serializers.CharField())
    candidates_evaluated = serializers.IntegerField(
        help_text="Configurations this request timed (a measure of the search's work, not of the answer).")
    estimator_calls = serializers.IntegerField(
        help_text="Estimator calls this request made: fewer when the server has met the workload's shape "
                  "before (the same model and training settings, any goal or dataset size).")
