"""The organisation's own API keys: list, create (the key is shown once), revoke, rotate."""

from django.shortcuts import get_object_or_404
from drf_spectacular.utils import extend_schema
from rest_framework import generics, status
from rest_framework.authentication import SessionAuthentication
from rest_framework.exceptions import ValidationError
from rest_framework.response import Response
from rest_framework.views import APIView

from portal.accounts.authentication import ApiKeyAuthentication
from portal.accounts.models import ApiKey
from portal.accounts.selectors import api_keys_of
from portal.accounts.services import api_key_issue, api_key_revoke, api_key_rotate
from portal.api.authentication import SelfRotationReplayAuthentication
from portal.api.idempotency import idempotent
from portal.api.permissions import require_org_admin
from portal.api.v1 import serializers_keys as sk
from portal.api.v1.pagination import NewestFirstCursor
from portal.api.v1.views.common import own_organisation
from portal.api.v1.views.quotes import IDEMPOTENCY_KEY


def _keys(request):
    """The caller's own organisation's keys (a reseller's: not its customers'), through the rule."""
    return api_keys_of(request.user, own_organisation(request.user))


def _managed_key(request, prefix: str) -> ApiKey:
    key = get_object_or_404(_keys(request), prefix=prefix)
    require_org_admin(request.user, key.organisation, what="revoke or rotate its API keys")
    return key


def _issued(issued) -> dict:
    return sk.ApiKeyIssuedSerializer(issued.api_key).data | {"key": issued.plaintext}


class ApiKeyListCreateView(generics.GenericAPIView):
    pagination_class = NewestFirstCursor
    serializer_class = sk.ApiKeyOutputSerializer

    @extend_schema(operation_id="api_keys_list", responses=sk.ApiKeyOutputSerializer(many=True),
                   summary="The organisation's API keys (revoked ones too), newest first")
    def get(self, request):
        page = self.paginate_queryset(_keys(request))
        return self.get_paginated_response(sk.ApiKeyOutputSerializer(page, many=True).data)

    @extend_schema(operation_id="api_keys_create", request=sk.ApiKeyInputSerializer,
                   parameters=[IDEMPOTENCY_KEY], responses={201: sk.ApiKeyIssuedSerializer},
                   summary="Issue a key for the organisation; the answer carries it, once")
    @idempotent
    def post(self, request):
        data = sk.ApiKeyInputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        organisation = own_organisation(request.user)
        require_org_admin(request.user, organisation, what="issue API keys")
        try:
            d = data.validated_data
            issued = api_key_issue(organisation=organisation, by=request.user,
                                   name=d["name"], scopes=list(d["scopes"]))
        except ValueError as exc:
            raise ValidationError({"non_field_errors": [str(exc)]}) from None
        return Response(_issued(issued), status=status.HTTP_201_CREATED,
                        headers={"Location": f"/api/v1/api-keys/{issued.api_key.prefix}"})


class ApiKeyRevokeView(APIView):
    @extend_schema(operation_id="api_keys_revoke", request=None, responses={200: sk.ApiKeyOutputSerializer},
                   summary="Revoke a key now (requests with it get 401)")
    def post(self, request, prefix: str):
        key = api_key_revoke(api_key=_managed_key(request, prefix))
        return Response(sk.ApiKeyOutputSerializer(key).data)


class ApiKeyRotateView(APIView):
    # A key that rotated itself is revoked; its retry (same Idempotency-Key) still gets the answer.
    authentication_classes = [SelfRotationReplayAuthentication, ApiKeyAuthentication,
                              SessionAuthentication]

    @extend_schema(operation_id="api_keys_rotate", request=None, parameters=[IDEMPOTENCY_KEY],
                   responses={201: sk.ApiKeyIssuedSerializer},
                   summary="A new key with the same name and scopes; the old one is revoked at once")
    @idempotent
    def post(self, request, prefix: str):
        try:
            issued = api_key_rotate(api_key=_managed_key(request, prefix), by=request.user)
        except ValueError as exc:
            raise ValidationError({"non_field_errors": [str(exc)]}) from None
        return Response(_issued(issued), status=status.HTTP_201_CREATED,
                        headers={"Location": f"/api/v1/api-keys/{issued.api_key.prefix}"})
