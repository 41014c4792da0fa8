"""GET/POST /api/v1/quotes and GET /api/v1/quotes/<reference>."""

from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import generics, status
from rest_framework.exceptions import ValidationError
from rest_framework.response import Response
from rest_framework.views import APIView

from portal.api.idempotency import KEY_PATTERN, MAX_KEY_LENGTH, idempotent
from portal.api.v1 import examples as ex
from portal.api.v1 import serializers as s
from portal.api.v1 import serializers_orders as so
from portal.api.v1.pagination import NewestFirstCursor
from portal.api.v1.rows import as_seen, quote_row, quote_rows
from portal.api.v1.views.common import list_filters, organisation_for_create
from portal.quotes.services import ConfigurationError, quote_create

IDEMPOTENCY_KEY = OpenApiParameter(
    "Idempotency-Key", {"type": "string", "minLength": 1, "maxLength": MAX_KEY_LENGTH,
                        "pattern": KEY_PATTERN}, OpenApiParameter.HEADER, required=False,
    description="Retry safely: the same key and body within 24 h answer the first response; "
                "another body → 422. 1–255 printable ASCII characters, e.g. a UUID.")


def quote_from_input(data, *, organisation, by):
    """A quote from a validated QuoteInputSerializer; rule failures are a 400 by field."""
    try:
        return quote_create(organisation=organisation, by=by, configuration=data.configuration(),
                            plan=data.validated_data["plan"])
    except ConfigurationError as exc:
        raise ValidationError(s.rule_errors(exc.problems)) from None
    except ValueError as exc:
        raise ValidationError({"plan": [str(exc)]}) from None


class QuoteListCreateView(generics.GenericAPIView):
    pagination_class = NewestFirstCursor
    serializer_class = s.QuoteOutputSerializer

    def get_queryset(self):
        quotes = quote_rows(self.request.user)
        customer = list_filters(so.QuoteListFilterSerializer, self.request).get("customer")
        if customer:
            quotes = quotes.filter(organisation__slug=customer)
        return quotes

    @extend_schema(operation_id="quotes_list", parameters=[so.QuoteListFilterSerializer],
                   responses=s.QuoteOutputSerializer(many=True),
                   summary="Quotes of the key's organisation (a reseller's: also its customers'), "
                           "newest first")
    def get(self, request):
        page = as_seen(request.user, self.paginate_queryset(self.get_queryset()))
        return self.get_paginated_response(s.QUOTE_ANSWERS.many(page))

    @extend_schema(operation_id="quotes_create", request=so.QuoteCreateInputSerializer, examples=ex.QUOTE,
                   parameters=[IDEMPOTENCY_KEY],
                   responses={201: s.QuoteOutputSerializer,
                              400: OpenApiResponse(description="Invalid input or a broken rule, by field.")},
                   summary="Price a configuration and freeze it as a quote")
    @idempotent
    def post(self, request):
        data = so.QuoteCreateInputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        organisation = organisation_for_create(request.user, data.validated_data.get("customer", ""))
        quote = quote_from_input(data, organisation=organisation, by=request.user)
        return Response(_quote_answer(request.user, quote), status=status.HTTP_201_CREATED,
                        headers={"Location": f"/api/v1/quotes/{quote.reference}"})


class QuoteDetailView(APIView):
    @extend_schema(operation_id="quotes_retrieve", responses={200: s.QuoteOutputSerializer},
                   summary="A quote of the key's organisation or (reseller) one of its customers")
    def get(self, request, reference: str):
        quote = quote_row(request.user, reference)
        return Response(s.QUOTE_ANSWERS.one(quote))


def _quote_answer(user, quote) -> dict:
    """A quote just made, as a read of it answers."""
    return s.QUOTE_ANSWERS.one(quote_row(user, quote.reference))
