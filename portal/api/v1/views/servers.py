"""A server's bucket key (the secret shown once; rotate for a new one) and the files the stack
step put on its nodes (list; download, rendered again as the node got it). The same services as
the server page (``provisioning.storage.services``, ``provisioning.stack.selectors``)."""

from django.http import Http404, HttpResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import status
from rest_framework.renderers import BaseRenderer, JSONRenderer
from rest_framework.response import Response
from rest_framework.views import APIView

from portal.api.errors import Conflict
from portal.api.idempotency import idempotent
from portal.api.v1 import serializers_orders as so
from portal.api.v1.views.orders import CONFLICT, _order
from portal.api.v1.views.quotes import IDEMPOTENCY_KEY
from provisioning.fulfilment import day2
from provisioning.stack.selectors import StaleFile, stack_downloads, stack_file
from provisioning.storage.selectors import retained_data_for
from provisioning.storage.services import (
    StorageResult,
    credential_reveal,
    credentials_file_snippet,
    storage_result_for,
)

FILE_TYPES = ("text/plain", "application/json", "application/yaml", "application/toml")


class StorageRevealView(APIView):
    @extend_schema(operation_id="servers_storage_reveal", request=None, parameters=[IDEMPOTENCY_KEY],
                   responses={200: so.StorageSecretSerializer, 409: CONFLICT},
                   summary="The bucket key's secret, shown once (retry with the same Idempotency-Key "
                           "to see it again within 24 h); afterwards rotate the key")
    @idempotent
    def post(self, request, reference: str):
        order = _order(request, reference)
        result = storage_result_for(order)
        if result is None:
            raise Conflict("This order has no bucket (yet).")
        revealed = credential_reveal(order=order)
        if revealed is None:
            raise Conflict("The secret of this key was already shown once. Rotate the key "
                           "(POST …/server/storage/rotate) to get a new one.")
        access_key_id, secret = revealed
        return _secret_answer(result, access_key_id, secret)


class RetainedKeyView(APIView):
    @extend_schema(operation_id="orders_storage_read_key_create", request=None,
                   responses={202: OpenApiResponse(description="Being issued: retained_data."
                                                               "read_key_pending is true until it "
                                                               "is ready."), 409: CONFLICT},
                   summary="A read-only key (list and get) to a terminated order's kept bucket; "
                           "replaces the previous one. Reveal its secret once afterwards")
    def post(self, request, reference: str):
        day2.order_retention_key_request(order=_order(request, reference),
                                         by=request.user)
        return Response({"read_key_pending": True}, status=status.HTTP_202_ACCEPTED)


class RetainedKeyRevealView(APIView):
    @extend_schema(operation_id="orders_storage_read_key_reveal", request=None,
                   parameters=[IDEMPOTENCY_KEY],
                   responses={200: so.StorageSecretSerializer, 409: CONFLICT},
                   summary="The read-only key's secret, shown once (retry with the same "
                           "Idempotency-Key to see it again within 24 h)")
    @idempotent
    def post(self, request, reference: str):
        order = _order(request, reference)
        data = retained_data_for(order)
        revealed = credential_reveal(order=order, read_only=True) if data else None
        if revealed is None:
            raise Conflict("No read-only key to show: issue one (POST …/storage/read-only-key), "
                           "or its secret was already shown once.")
        access_key_id, secret = revealed
        where = StorageResult(bucket=data.bucket, endpoint=data.endpoint, region=data.region,
                              access_key_id=access_key_id)
        return _secret_answer(where, access_key_id, secret)


def _secret_answer(where: StorageResult, access_key_id: str, secret: str) -> Response:
    """A key's secret, shown once: never stored by a cache on the way."""
    body = {"bucket": where.bucket, "endpoint": where.endpoint, "region": where.region,
            "access_key_id": access_key_id, "secret_access_key": secret,
            "credentials_file": credentials_file_snippet(result=where, secret=secret)}
    return Response(so.StorageSecretSerializer(body).data, headers={"Cache-Control": "no-store"})


class StorageRotateView(APIView):
    @extend_schema(operation_id="servers_storage_rotate", request=None,
                   responses={202: so.RunOutputSerializer, 409: CONFLICT},
                   summary="A new bucket key on every node; the old one is revoked once the new one "
                           "works. Reveal the new secret afterwards")
    def post(self, request, reference: str):
        run = day2.server_rotate_storage_key(order=_order(request, reference),
                                             by=request.user)
        return Response(so.RunOutputSerializer(run).data, status=status.HTTP_202_ACCEPTED)


class StackFileListView(APIView):
    @extend_schema(operation_id="servers_stack_files_list",
                   responses={200: so.NodeStackFilesSerializer(many=True)},
                   summary="The training-environment files on each node (name, path, SHA-256)")
    def get(self, request, reference: str):
        order = _order(request, reference)
        nodes = [{"hostname": n.hostname, "rank": n.rank,
                  "files": [{"name": f.name, "path": f.path, "sha256": f.sha256,
                             "url": f"/api/v1/orders/{order.reference}/server/stack-files/"
                                    f"{n.hostname}/{f.name}"} for f in n.files]}
                 for n in stack_downloads(order)]
        return Response(so.NodeStackFilesSerializer(nodes, many=True).data)


class FileRenderer(BaseRenderer):
    """Lets a client accept the file's own type; errors are still JSON problems."""

    media_type = "*/*"
    format = "file"

    def render(self, data, accepted_media_type=None, renderer_context=None):
        return JSONRenderer().render(data, renderer_context=renderer_context)


class StackFileDownloadView(APIView):
    renderer_classes = [JSONRenderer, FileRenderer]

    @extend_schema(operation_id="servers_stack_files_retrieve",
                   responses={**{(200, t): OpenApiTypes.STR for t in FILE_TYPES},
                              409: OpenApiResponse(description="The file renders differently now "
                                                               "than when it was deployed; re-deploy.")},
                   summary="One file as the node received it (header X-Content-SHA256)")
    def get(self, request, reference: str, hostname: str, name: str):
        order = _order(request, reference)
        try:
            file = stack_file(order, hostname=hostname, name=name)
        except StaleFile as exc:
            raise Conflict(str(exc)) from None
        if file is None:
            raise Http404
        response = HttpResponse(file.content, content_type=f"{file.content_type}; charset=utf-8")
        response["Content-Disposition"] = f'attachment; filename="{hostname}-{file.name}"'
        response["X-Content-SHA256"] = file.sha256
        return response
