"""POST /api/v1/estimates and /api/v1/recommendations: the pure modules' JSON."""

from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework.exceptions import ValidationError
from rest_framework.response import Response
from rest_framework.views import APIView

from portal.accounts.selectors import primary_organisation
from portal.api.v1 import examples as ex
from portal.api.v1 import serializers as s
from portal.sizing import services


class EstimateView(APIView):
    post_scope = "read"  # computes an answer, stores nothing
    @extend_schema(operation_id="estimates_create", request=s.EstimateInputSerializer, examples=ex.ESTIMATE,
                   responses={200: s.EstimateOutputSerializer,
                              400: OpenApiResponse(description="Invalid input, by field.")},
                   summary="Memory and compute estimate for one configuration (the estimator's JSON)")
    def post(self, request):
        data = s.EstimateInputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        d = data.validated_data
        if "plan" in d:  # a stored plan: the same per-GPU bytes as when it was recommended
            try:
                return Response(services.stored_plan_estimate_json(d["plan"]))
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
    post_scope = "read"
    @extend_schema(operation_id="recommendations_create", request=s.RecommendationInputSerializer,
                   examples=ex.RECOMMENDATION,
                   responses={200: s.RecommendationOutputSerializer,
                              400: OpenApiResponse(description="Invalid input, or nothing fits.")},
                   summary="Ranked plans over the catalog (the recommender's JSON)")
    def post(self, request):
        data = s.RecommendationInputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        try:
            workload, goal, options = data.request()
            rec = services.recommendation_run(
                workload=workload, goal=goal, options=options,
                catalog_data=services.catalog(organisation=primary_organisation(request.user),
                                              viewer=request.user))
        except ValueError as exc:
            raise ValidationError({"non_field_errors": [str(exc)]}) from None
        return Response(rec.to_dict())
