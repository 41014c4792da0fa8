"""A server's GPU metrics over a range: the same series as the server page's charts, read from
Prometheus with a query built from the order's own label only (``provisioning.monitoring``)."""

from drf_spectacular.utils import extend_schema
from rest_framework.response import Response
from rest_framework.views import APIView

from portal.api.v1.serializers_metrics import MetricsQuerySerializer, MetricsSerializer
from portal.api.v1.views.orders import _order
from provisioning.monitoring.selectors import order_chart


class ServerMetricsView(APIView):
    @extend_schema(operation_id="servers_metrics_retrieve", parameters=[MetricsQuerySerializer],
                   responses={200: MetricsSerializer},
                   summary="One GPU metric of the order's nodes over a range, a series per GPU")
    def get(self, request, reference: str):
        order = _order(request, reference)
        query = MetricsQuerySerializer(data=request.query_params)
        query.is_valid(raise_exception=True)
        chart = order_chart(order, metric=query.validated_data["metric"],
                            range_key=query.validated_data["range"])
        return Response(MetricsSerializer({
            "metric": chart.metric, "label": chart.label, "unit": chart.unit, "range": chart.range,
            "start": chart.start, "end": chart.end, "step_s": chart.step_s,
            "simulated": chart.simulated, "unavailable": chart.error,
            "series": [{"node": s.node, "gpu": s.gpu, "points": [list(p) for p in s.points]}
                       for s in chart.series]}).data)
