"""Thin adapters: InputSerializer → service → OutputSerializer."""

from django.http import Http404
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import status
from rest_framework.exceptions import PermissionDenied, ValidationError
from rest_framework.response import Response
from rest_framework.views import APIView

from portal.accounts.authentication import ApiKeyUser
from portal.accounts.models import Organisation
from portal.accounts.selectors import organisations_for, primary_organisation
from portal.api.v1 import schema  # noqa: F401  (registers the API-key scheme)
from portal.api.v1 import serializers as s
from portal.quotes.selectors import quotes_visible
from portal.quotes.services import ConfigurationError, quote_create
from portal.sizing import services


def _organisations(user):
    if isinstance(user, ApiKeyUser):
        return Organisation.objects.filter(pk=user.organisation.pk)
    return organisations_for(user)


def _organisation(user):
    org = user.organisation if isinstance(user, ApiKeyUser) else primary_organisation(user)
    if org is None:
        raise PermissionDenied("This login belongs to no organisation, so it cannot hold quotes.")
    return org


class QuoteCreateView(APIView):
    @extend_schema(operation_id="quotes_create", request=s.QuoteInputSerializer,
                   responses={201: s.QuoteOutputSerializer,
                              400: OpenApiResponse(description="Invalid input or a broken rule, by field.")},
                   summary="Price a configuration and freeze it as a quote for the key's organisation")
    def post(self, request):
        data = s.QuoteInputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        try:
            quote = quote_create(organisation=_organisation(request.user), by=request.user,
                                 configuration=data.configuration(), plan=data.validated_data["plan"])
        except ConfigurationError as exc:
            raise ValidationError({p.field: [p.text] for p in exc.problems}) from None
        except ValueError as exc:
            raise ValidationError({"plan": [str(exc)]}) from None
        return Response(s.QuoteOutputSerializer(quote).data, status=status.HTTP_201_CREATED,
                        headers={"Location": f"/api/v1/quotes/{quote.reference}"})


class QuoteDetailView(APIView):
    @extend_schema(operation_id="quotes_retrieve", responses={200: s.QuoteOutputSerializer},
                   summary="A quote of the key's organisation")
    def get(self, request, reference: str):
        quote = quotes_visible(organisations=_organisations(request.user)).filter(reference=reference).first()
        if quote is None:
            raise Http404
        return Response(s.QuoteOutputSerializer(quote).data)


class EstimateView(APIView):
    @extend_schema(operation_id="estimates_create", request=s.EstimateInputSerializer,
                   responses={200: s.EstimateOutputSerializer,
                              400: OpenApiResponse(description="Invalid input, by field.")},
                   summary="Memory and compute estimate for one configuration (the estimator's JSON)")
    def post(self, request):
        data = s.EstimateInputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        d = data.validated_data
        if "plan" in d:  # a stored plan: the same per-GPU bytes as when it was recommended
            try:
                return Response(services.estimate_stored_plan(d["plan"]).to_dict())
            except ValueError as exc:
                raise ValidationError({"plan": [str(exc)]}) from None
        try:
            est = services.estimate_run(
                model=data.model_spec(), training=d.get("training") or {}, parallel=d.get("parallel") or {},
                gpu_slug=d.get("gpu"), sku_slug=d.get("sku"), network_slug=d.get("network"),
                train_tokens=d.get("train_tokens"))
        except ValueError as exc:
            raise ValidationError({"non_field_errors": [str(exc)]}) from None
        return Response(est.to_dict())


class RecommendationView(APIView):
    @extend_schema(operation_id="recommendations_create", request=s.RecommendationInputSerializer,
                   responses={200: s.RecommendationOutputSerializer,
                              400: OpenApiResponse(description="Invalid input, or nothing fits.")},
                   summary="Ranked plans over the catalog (the recommender's JSON)")
    def post(self, request):
        data = s.RecommendationInputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        d = dict(data.validated_data)
        goal, options = d.pop("goal", {}), d.pop("options", {})
        d.pop("hf_config", None)
        try:
            rec = services.recommendation_from_values(model=data.model_spec(), workload=d, goal=goal,
                                                      options=options)
        except ValueError as exc:
            raise ValidationError({"non_field_errors": [str(exc)]}) from None
        return Response(rec.to_dict())
