"""A reseller's customers: create, list, retrieve, rename."""

from django.http import Http404
from django.shortcuts import get_object_or_404
from drf_spectacular.utils import extend_schema
from rest_framework import generics, status
from rest_framework.exceptions import PermissionDenied
from rest_framework.response import Response
from rest_framework.views import APIView

from portal.accounts.models import Organisation
from portal.accounts.selectors import customers_visible_to
from portal.accounts.services import customer_create, customer_update
from portal.api.idempotency import idempotent
from portal.api.permissions import require_org_admin
from portal.api.v1 import examples as ex
from portal.api.v1 import serializers_orders as so
from portal.api.v1.pagination import NewestFirstCursor
from portal.api.v1.views.common import own_organisation
from portal.api.v1.views.quotes import IDEMPOTENCY_KEY


def _reseller(request) -> Organisation:
    org = own_organisation(request.user)
    if org.kind != Organisation.Kind.RESELLER:
        raise PermissionDenied("Only a reseller's key has customers.")
    return org


def _customer(request, slug: str) -> tuple[Organisation, Organisation]:
    """(reseller, customer); a 404 for anyone else's, also when the caller is no reseller."""
    org = own_organisation(request.user)
    if org.kind != Organisation.Kind.RESELLER:
        raise Http404
    return org, get_object_or_404(customers_visible_to(request.user, org), slug=slug)


class CustomerListCreateView(generics.GenericAPIView):
    pagination_class = NewestFirstCursor
    serializer_class = so.CustomerOutputSerializer

    @extend_schema(operation_id="customers_list", responses=so.CustomerOutputSerializer(many=True),
                   summary="The reseller's customer organisations")
    def get(self, request):
        page = self.paginate_queryset(customers_visible_to(request.user, _reseller(request)))
        return self.get_paginated_response(so.CustomerOutputSerializer(page, many=True).data)

    @extend_schema(operation_id="customers_create", request=so.CustomerInputSerializer, examples=ex.CUSTOMER,
                   parameters=[IDEMPOTENCY_KEY], responses={201: so.CustomerOutputSerializer},
                   summary="Create a customer organisation sold by the reseller")
    @idempotent
    def post(self, request):
        data = so.CustomerInputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        reseller = _reseller(request)
        require_org_admin(request.user, reseller, what="create customers")
        customer = customer_create(reseller=reseller, **data.validated_data)
        return Response(so.CustomerOutputSerializer(customer).data, status=status.HTTP_201_CREATED,
                        headers={"Location": f"/api/v1/customers/{customer.slug}"})


class CustomerDetailView(APIView):
    @extend_schema(operation_id="customers_retrieve", responses={200: so.CustomerOutputSerializer},
                   summary="One of the reseller's customers")
    def get(self, request, slug: str):
        _, customer = _customer(request, slug)
        return Response(so.CustomerOutputSerializer(customer).data)

    @extend_schema(operation_id="customers_update", request=so.CustomerUpdateSerializer(partial=True),
                   examples=ex.CUSTOMER_RENAME,
                   responses={200: so.CustomerOutputSerializer}, summary="Rename a customer")
    def patch(self, request, slug: str):
        reseller, customer = _customer(request, slug)
        require_org_admin(request.user, reseller, what="rename customers")
        data = so.CustomerUpdateSerializer(data=request.data, partial=True)  # PATCH: what is sent
        data.is_valid(raise_exception=True)
        if "name" in data.validated_data:
            customer = customer_update(customer=customer, name=data.validated_data["name"])
        return Response(so.CustomerOutputSerializer(customer).data)
