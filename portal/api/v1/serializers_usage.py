"""Usage and cost so far (GET /api/v1/usage): the billing selectors' answer, amounts in USD as
decimal strings, to the cent."""

from rest_framework import serializers

MONEY = {"max_digits": 14, "decimal_places": 2}
MONTH = r"^(000[1-9]|00[1-9][0-9]|0[1-9][0-9]{2}|[1-9][0-9]{3})-(0[1-9]|1[0-2])$"  # years 0001 to 9999


class UsageQuerySerializer(serializers.Serializer):
    order = serializers.CharField(required=False, help_text="One order's usage (its reference).")
    customer = serializers.SlugField(required=False,
                                     help_text="A reseller's customer (its slug); default: your own "
                                               "organisation.")
    month = serializers.RegexField(MONTH, required=False,
                                   error_messages={"invalid": "A month as YYYY-MM (01 to 12)."},
                                   help_text="YYYY-MM, a past or the current month (default: now).")

    def validate(self, attrs):
        if attrs.get("order") and attrs.get("customer"):
            raise serializers.ValidationError({"customer": ["Give an order or a customer, not both."]})
        return attrs


class MeterSerializer(serializers.Serializer):
    kind = serializers.ChoiceField(choices=["node", "storage"])
    label = serializers.CharField(help_text="The node's hostname, or the bucket.")
    running = serializers.BooleanField(help_text="Still billed now.")
    billed_hours = serializers.IntegerField(source="units",
                                            help_text="Started billing units (hours) this month.")
    capped_at_monthly_rate = serializers.BooleanField(source="by_month")
    cost_so_far = serializers.DecimalField(source="so_far", **MONEY)
    forecast = serializers.DecimalField(**MONEY)


class OrderUsageSerializer(serializers.Serializer):
    order = serializers.CharField(help_text="The order's reference.")
    organisation = serializers.CharField(help_text="The organisation's slug.")
    cost_so_far = serializers.DecimalField(**MONEY)
    forecast = serializers.DecimalField(**MONEY,
                                        help_text="To the month's end if what runs keeps running.")
    storage = serializers.DecimalField(**MONEY, help_text="Of cost_so_far: object storage.")
    meters = MeterSerializer(many=True)


class UsageSerializer(serializers.Serializer):
    organisation = serializers.CharField()
    month = serializers.CharField(help_text="YYYY-MM (UTC).")
    period_start = serializers.DateTimeField()
    period_end = serializers.DateTimeField(help_text="Exclusive: the next month's first instant.")
    as_of = serializers.DateTimeField()
    currency = serializers.CharField()
    cost_so_far = serializers.DecimalField(**MONEY, help_text="Excluding tax.")
    forecast = serializers.DecimalField(**MONEY)
    orders = OrderUsageSerializer(many=True)


class InvoiceQuerySerializer(serializers.Serializer):
    customer = serializers.SlugField(required=False,
                                     help_text="A reseller's customer (its slug); default: your own "
                                               "organisation.")


class InvoiceLineSerializer(serializers.Serializer):
    description = serializers.CharField()
    order = serializers.CharField(source="order.reference", allow_null=True, default=None)
    hours = serializers.DecimalField(source="quantity", max_digits=12, decimal_places=2)
    amount = serializers.DecimalField(**MONEY)


class InvoiceSerializer(serializers.Serializer):
    number = serializers.CharField()
    kind = serializers.ChoiceField(choices=["invoice", "credit_note"])
    organisation = serializers.CharField(source="organisation.slug")
    month = serializers.DateField(source="period_start", format="%Y-%m")
    issued_at = serializers.DateTimeField()
    credit_for = serializers.CharField(source="credit_for.number", allow_null=True, default=None,
                                       help_text="The invoice a credit note corrects.")
    reason = serializers.CharField(help_text="A credit note's reason.")
    customer = serializers.DictField(child=serializers.CharField(allow_blank=True),
                                     help_text="As issued: legal_name, address, country, vat_id.")
    issuer = serializers.DictField(source="issuer_details",
                                   child=serializers.CharField(allow_blank=True))
    currency = serializers.CharField()
    subtotal = serializers.DecimalField(**MONEY)
    tax_rate = serializers.DecimalField(max_digits=5, decimal_places=2, help_text="Percent.")
    tax = serializers.DecimalField(**MONEY)
    total = serializers.DecimalField(**MONEY)
    tax_note = serializers.CharField(help_text="The wording the tax treatment requires "
                                               "(e.g. the reverse charge).")
    lines = InvoiceLineSerializer(many=True)
