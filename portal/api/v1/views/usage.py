"""GET /api/v1/usage: the month's cost so far and forecast, of the caller's organisation, a
reseller's customer, or one order (another organisation's is a 404, like everywhere)."""

from decimal import Decimal

from django.shortcuts import get_object_or_404
from django.utils import timezone
from drf_spectacular.utils import extend_schema
from rest_framework.exceptions import ValidationError
from rest_framework.response import Response
from rest_framework.views import APIView

from portal.accounts.selectors import organisations_for
from portal.api.v1 import serializers_usage as su
from portal.api.v1.views.common import own_organisation
from portal.billing.selectors import as_of, month_of, month_parse, price_basis, usage_costs
from portal.orders.selectors import orders_for


class UsageView(APIView):
    @extend_schema(operation_id="usage_retrieve", parameters=[su.UsageQuerySerializer],
                   responses={200: su.UsageSerializer},
                   summary="Cost so far this month (or a past month) and the forecast to its end, "
                           "by order, node and storage")
    def get(self, request):
        query = su.UsageQuerySerializer(data=request.query_params)
        query.is_valid(raise_exception=True)
        q = query.validated_data
        try:
            period = month_parse(q["month"]) if q.get("month") else month_of(timezone.now())
        except ValueError as exc:
            raise ValidationError({"month": [str(exc)]}) from None
        moment = as_of(period)
        if q.get("order"):
            order = get_object_or_404(orders_for(request.user), reference=q["order"])
            organisation = order.organisation
            costs = usage_costs(order_ids=[order.pk], at=moment,
                                markup=price_basis(request.user, organisation))
        else:
            organisation = (get_object_or_404(organisations_for(request.user), slug=q["customer"])
                            if q.get("customer") else own_organisation(request.user))
            costs = usage_costs(organisation_id=organisation.pk, at=moment,
                                markup=price_basis(request.user, organisation))
        references = dict(orders_for(request.user).filter(pk__in=[c.order_id for c in costs])
                          .values_list("pk", "reference"))
        orders = [{"order": references[c.order_id], "organisation": organisation.slug,
                   "cost_so_far": c.so_far, "forecast": c.forecast, "storage": c.storage,
                   "meters": c.meters} for c in costs]
        return Response(su.UsageSerializer({
            "organisation": organisation.slug, "month": f"{period.start:%Y-%m}",
            "period_start": period.start, "period_end": period.end, "as_of": moment,
            "currency": "USD", "cost_so_far": sum((c.so_far for c in costs), Decimal("0.00")),
            "forecast": sum((c.forecast for c in costs), Decimal("0.00")), "orders": orders}).data)
