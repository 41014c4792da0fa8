"""SSH keys of the key's organisation (a reseller's: also its customers'): list, add, retrieve,
remove. Adding or removing one installs the change on the organisation's active servers."""

from django.shortcuts import get_object_or_404
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import generics, status
from rest_framework.exceptions import PermissionDenied
from rest_framework.response import Response
from rest_framework.views import APIView

from portal.accounts.models import SSHKey
from portal.accounts.principals import ApiKeyPrincipal
from portal.accounts.selectors import can_manage_ssh_keys, organisations_for
from portal.api.idempotency import idempotent
from portal.api.v1 import examples as ex
from portal.api.v1 import serializers_ssh_keys as sk
from portal.api.v1.pagination import NewestFirstCursor
from portal.api.v1.views.common import organisation_for_create
from portal.api.v1.views.quotes import IDEMPOTENCY_KEY
from provisioning.fulfilment.ssh_keys import ssh_key_add, ssh_key_remove


def _visible_keys(user):
    return (SSHKey.objects.filter(organisation__in=organisations_for(user))
            .select_related("organisation"))


def _require_manage(user, organisation) -> None:
    """A key with the write scope may (KeyScope checked it); a person must be an admin."""
    if not isinstance(user, ApiKeyPrincipal) and not can_manage_ssh_keys(user, organisation):
        raise PermissionDenied("Only an admin of this organisation can change its SSH keys.")


class SSHKeyListCreateView(generics.GenericAPIView):
    pagination_class = NewestFirstCursor
    serializer_class = sk.SSHKeyOutputSerializer

    def get_queryset(self):
        filters = sk.SSHKeyListFilterSerializer(data=self.request.query_params)
        filters.is_valid(raise_exception=True)
        keys = _visible_keys(self.request.user)
        if filters.validated_data.get("customer"):
            keys = keys.filter(organisation__slug=filters.validated_data["customer"])
        return keys

    @extend_schema(operation_id="ssh_keys_list", parameters=[sk.SSHKeyListFilterSerializer],
                   responses=sk.SSHKeyOutputSerializer(many=True),
                   summary="SSH keys of the organisation (a reseller's: also its customers'), "
                           "newest first")
    def get(self, request):
        page = self.paginate_queryset(self.get_queryset())
        return self.get_paginated_response(sk.SSHKeyOutputSerializer(page, many=True).data)

    @extend_schema(operation_id="ssh_keys_create", request=sk.SSHKeyInputSerializer, examples=ex.SSH_KEY,
                   parameters=[IDEMPOTENCY_KEY],
                   responses={201: sk.SSHKeyOutputSerializer,
                              400: OpenApiResponse(description="Not one good public key, or a "
                                                               "key the organisation has already.")},
                   summary="Add an SSH public key: installed on the organisation's active servers")
    @idempotent
    def post(self, request):
        data = sk.SSHKeyInputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        organisation = organisation_for_create(request.user, data.validated_data.get("customer", ""))
        _require_manage(request.user, organisation)
        key = ssh_key_add(public_key=data.validated_data["public_key"],
                          name=data.validated_data["name"], organisation=organisation,
                          by=request.user)
        return Response(sk.SSHKeyOutputSerializer(key).data, status=status.HTTP_201_CREATED,
                        headers={"Location": f"/api/v1/ssh-keys/{key.pk}"})


class SSHKeyDetailView(APIView):
    @extend_schema(operation_id="ssh_keys_retrieve", responses={200: sk.SSHKeyOutputSerializer},
                   summary="One SSH key")
    def get(self, request, key_id: int):
        key = get_object_or_404(_visible_keys(request.user), pk=key_id)
        return Response(sk.SSHKeyOutputSerializer(key).data)

    @extend_schema(operation_id="ssh_keys_destroy", request=None, responses={204: None},
                   summary="Remove an SSH key: removed from the organisation's active servers")
    def delete(self, request, key_id: int):
        key = get_object_or_404(_visible_keys(request.user), pk=key_id)
        _require_manage(request.user, key.organisation)
        ssh_key_remove(ssh_key=key, by=request.user)
        return Response(status=status.HTTP_204_NO_CONTENT)
