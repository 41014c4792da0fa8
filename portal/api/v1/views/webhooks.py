"""Webhook endpoints: create (secret shown once), list, read, change, delete, rotate the secret,
send a test event, read the delivery log."""

from django.shortcuts import get_object_or_404
from drf_spectacular.utils import extend_schema
from rest_framework import generics, status
from rest_framework.response import Response
from rest_framework.views import APIView

from portal.api.errors import Conflict
from portal.api.idempotency import idempotent
from portal.api.permissions import require_org_admin
from portal.api.v1 import examples as ex
from portal.api.v1 import serializers_webhooks as sw
from portal.api.v1.pagination import NewestFirstCursor
from portal.api.v1.views.common import own_organisation
from portal.api.v1.views.quotes import IDEMPOTENCY_KEY
from portal.webhooks.models import WebhookEndpoint
from portal.webhooks.publish import endpoint_test_send
from portal.webhooks.selectors import deliveries_of, endpoints_visible_to
from portal.webhooks.services import endpoint_create, endpoint_delete, endpoint_rotate_secret, endpoint_update


def _endpoint(request, reference: str) -> WebhookEndpoint:
    return get_object_or_404(endpoints_visible_to(request.user), reference=reference)


def _managed_endpoint(request, reference: str) -> WebhookEndpoint:
    endpoint = _endpoint(request, reference)
    require_org_admin(request.user, endpoint.organisation, what="change its webhook endpoints")
    return endpoint


class WebhookListCreateView(generics.GenericAPIView):
    pagination_class = NewestFirstCursor
    serializer_class = sw.WebhookEndpointOutputSerializer

    @extend_schema(operation_id="webhooks_list", responses=sw.WebhookEndpointOutputSerializer(many=True),
                   summary="Webhook endpoints, newest first")
    def get(self, request):
        page = self.paginate_queryset(endpoints_visible_to(request.user))
        return self.get_paginated_response(sw.WebhookEndpointOutputSerializer(page, many=True).data)

    @extend_schema(operation_id="webhooks_create", request=sw.WebhookEndpointInputSerializer,
                   examples=ex.WEBHOOK,
                   parameters=[IDEMPOTENCY_KEY], responses={201: sw.WebhookEndpointWithSecretSerializer},
                   summary="Add an endpoint; the answer carries its signing secret, once")
    @idempotent
    def post(self, request):
        data = sw.WebhookEndpointInputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        organisation = own_organisation(request.user)
        require_org_admin(request.user, organisation, what="add webhook endpoints")
        endpoint, secret = endpoint_create(organisation=organisation, **data.validated_data)
        body = sw.WebhookEndpointWithSecretSerializer(endpoint).data | {"secret": secret}
        return Response(body, status=status.HTTP_201_CREATED,
                        headers={"Location": f"/api/v1/webhooks/{endpoint.reference}"})


class WebhookDetailView(APIView):
    @extend_schema(operation_id="webhooks_retrieve", responses={200: sw.WebhookEndpointOutputSerializer},
                   summary="One webhook endpoint")
    def get(self, request, reference: str):
        return Response(sw.WebhookEndpointOutputSerializer(_endpoint(request, reference)).data)

    @extend_schema(operation_id="webhooks_update", request=sw.WebhookEndpointUpdateSerializer,
                   examples=ex.WEBHOOK_UPDATE,
                   responses={200: sw.WebhookEndpointOutputSerializer},
                   summary="Change the URL, event types or description; enable or disable")
    def patch(self, request, reference: str):
        endpoint = _managed_endpoint(request, reference)
        data = sw.WebhookEndpointUpdateSerializer(data=request.data, partial=True)
        data.is_valid(raise_exception=True)
        endpoint = endpoint_update(endpoint=endpoint, **data.validated_data)
        return Response(sw.WebhookEndpointOutputSerializer(endpoint).data)

    @extend_schema(operation_id="webhooks_destroy", responses={204: None},
                   summary="Delete an endpoint (pending deliveries are dropped)")
    def delete(self, request, reference: str):
        endpoint_delete(endpoint=_managed_endpoint(request, reference))
        return Response(status=status.HTTP_204_NO_CONTENT)


class WebhookRotateSecretView(APIView):
    @extend_schema(operation_id="webhooks_rotate_secret", request=None, parameters=[IDEMPOTENCY_KEY],
                   responses={200: sw.WebhookSecretSerializer},
                   summary="A new signing secret, used from the next attempt on; shown once")
    @idempotent
    def post(self, request, reference: str):
        secret = endpoint_rotate_secret(endpoint=_managed_endpoint(request, reference))
        return Response({"secret": secret})


class WebhookTestView(APIView):
    @extend_schema(operation_id="webhooks_test", request=None,
                   responses={202: sw.WebhookDeliverySerializer},
                   summary="Send a `webhook.test` event to this endpoint now")
    def post(self, request, reference: str):
        endpoint = _managed_endpoint(request, reference)
        if not endpoint.enabled:
            raise Conflict("This endpoint is disabled; enable it first (PATCH enabled=true).")
        delivery = endpoint_test_send(endpoint=endpoint)
        return Response(sw.WebhookDeliverySerializer(delivery).data, status=status.HTTP_202_ACCEPTED)


class WebhookDeliveryListView(generics.GenericAPIView):
    pagination_class = NewestFirstCursor
    serializer_class = sw.WebhookDeliverySerializer

    @extend_schema(operation_id="webhooks_deliveries", responses=sw.WebhookDeliverySerializer(many=True),
                   summary="The endpoint's delivery log, "
                                                               "newest first, with every attempt")
    def get(self, request, reference: str):
        endpoint = _endpoint(request, reference)
        page = self.paginate_queryset(deliveries_of(endpoint))
        return self.get_paginated_response(sw.WebhookDeliverySerializer(page, many=True).data)
