"""Orders: create (from a quote or inline, placed and submitted), list, retrieve, cancel,
terminate, events; servers: access, acceptance, health, reboot, re-deploy (the bucket key and
stack files: views/servers.py)."""

from dataclasses import asdict

from django.shortcuts import get_object_or_404
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import generics, status
from rest_framework.exceptions import ValidationError
from rest_framework.response import Response
from rest_framework.views import APIView

from portal.accounts.selectors import organisations_for
from portal.api.idempotency import idempotent
from portal.api.v1 import examples as ex
from portal.api.v1 import serializers as s
from portal.api.v1 import serializers_orders as so
from portal.api.v1.pagination import NewestFirstCursor
from portal.api.v1.rows import as_seen, order_row, order_rows
from portal.api.v1.views.common import list_filters, organisation_for_create
from portal.api.v1.views.quotes import IDEMPOTENCY_KEY
from portal.orders.selectors import order_events, orders_for
from portal.orders.states import OrderState
from portal.quotes.selectors import quotes_visible
from portal.quotes.services import ConfigurationError, quote_stack_problem
from provisioning.fulfilment import day2
from provisioning.fulfilment.orders import order_cancel, order_create_and_submit, order_request_termination
from provisioning.fulfilment.selectors import acceptance_report, order_access, order_last_health
from provisioning.storage.selectors import retained_data_for, storage_for

CONFLICT = OpenApiResponse(description="The order's state does not allow it (problem+json).")


def _order(request, reference: str):
    return get_object_or_404(orders_for(request.user), reference=reference)


def _order_answer(user, order) -> dict:
    """An order as a read of it answers (after a change: its state now)."""
    return so.ORDER_ANSWERS.one(order_row(user, order.reference))


class OrderListCreateView(generics.GenericAPIView):
    pagination_class = NewestFirstCursor
    serializer_class = so.OrderOutputSerializer

    def get_queryset(self):
        f = list_filters(so.OrderListFilterSerializer, self.request)
        orders = order_rows(self.request.user)
        if f.get("state"):
            orders = orders.filter(state__in=f["state"])
        if f.get("customer"):
            orders = orders.filter(organisation__slug=f["customer"])
        if f.get("created_after"):
            orders = orders.filter(created_at__gte=f["created_after"])
        if f.get("created_before"):
            orders = orders.filter(created_at__lt=f["created_before"])
        return orders

    @extend_schema(operation_id="orders_list", parameters=[so.OrderListFilterSerializer],
                   responses=so.OrderOutputSerializer(many=True),
                   summary="Orders, newest first (cursor pages); filters: state, customer, created time")
    def get(self, request):
        page = as_seen(request.user, self.paginate_queryset(self.get_queryset()))
        return self.get_paginated_response(so.ORDER_ANSWERS.many(page))

    @extend_schema(operation_id="orders_create", request=so.OrderCreateInputSerializer, examples=ex.ORDER,
                   parameters=[IDEMPOTENCY_KEY],
                   responses={201: so.OrderOutputSerializer,
                              400: OpenApiResponse(description="Invalid input or a broken rule, by field."),
                              409: OpenApiResponse(description="The quote expired or is already ordered.")},
                   summary="Place and submit an order from a quote or an inline configuration")
    @idempotent
    def post(self, request):
        data = so.OrderCreateInputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        d = data.validated_data
        customer = d.get("customer", "")
        organisation = organisation_for_create(request.user, customer) if customer else None
        if "quote" in d:
            quote = quotes_visible(organisations=organisations_for(request.user)).filter(
                reference=d["quote"]).first()
            if quote is None:
                raise ValidationError({"quote": [f"No quote {d['quote']!r} of yours."]})
            if problem := quote_stack_problem(quote):
                raise ValidationError({"quote": [problem]})
            order = order_create_and_submit(by=request.user, quote=quote, organisation=organisation)
        else:
            inline = s.QuoteInputSerializer(data=request.data["configuration"])
            inline.is_valid(raise_exception=True)
            try:
                order = order_create_and_submit(
                    by=request.user, configuration=inline.configuration(),
                    organisation=organisation or organisation_for_create(request.user),
                    plan=inline.validated_data["plan"])
            except ConfigurationError as exc:
                raise ValidationError({"configuration": s.rule_errors(exc.problems)}) from None
        return Response(_order_answer(request.user, order), status=status.HTTP_201_CREATED,
                        headers={"Location": f"/api/v1/orders/{order.reference}"})


class OrderDetailView(APIView):
    @extend_schema(operation_id="orders_retrieve", responses={200: so.OrderDetailOutputSerializer},
                   summary="One order; once it terminates, its kept bucket (retained_data)")
    def get(self, request, reference: str):
        answer = so.ORDER_ANSWERS.one(order_row(request.user, reference))
        retained = (retained_data_for(_order(request, reference))
                    if answer["state"] in (OrderState.TERMINATING, OrderState.TERMINATED) else None)
        return Response({**answer, "retained_data": so.RetainedDataSerializer(retained).data
                         if retained else None})


class OrderCancelView(APIView):
    @extend_schema(operation_id="orders_cancel", request=so.OrderCancelInputSerializer, examples=ex.CANCEL,
                   responses={200: so.OrderOutputSerializer, 409: CONFLICT},
                   summary="Cancel an order before provisioning starts")
    def post(self, request, reference: str):
        order = _order(request, reference)
        data = so.OrderCancelInputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        order = order_cancel(order=order, by=request.user, reason=data.validated_data["reason"])
        return Response(_order_answer(request.user, order))


class OrderTerminateView(APIView):
    @extend_schema(operation_id="orders_terminate", request=so.OrderTerminateInputSerializer,
                   examples=ex.TERMINATE,
                   responses={202: so.OrderOutputSerializer, 409: CONFLICT},
                   summary="Terminate the servers of an order: access revoked, disks wiped")
    def post(self, request, reference: str):
        order = _order(request, reference)
        data = so.OrderTerminateInputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        order = order_request_termination(order=order, by=request.user,
                                          note=data.validated_data["note"])
        return Response(_order_answer(request.user, order), status=status.HTTP_202_ACCEPTED)


class OrderEventListView(APIView):
    @extend_schema(operation_id="orders_events_list",
                   responses={200: so.OrderEventOutputSerializer(many=True)},
                   summary="The order's history: each transition, oldest first")
    def get(self, request, reference: str):
        events = order_events(_order(request, reference)).select_related("api_key", "order")
        return Response(so.OrderEventOutputSerializer(events, many=True).data)


class ServerDetailView(APIView):
    @extend_schema(operation_id="servers_retrieve", responses={200: so.ServerOutputSerializer},
                   summary="How to reach the order's servers and bucket, the acceptance report, last health")
    def get(self, request, reference: str):
        order = _order(request, reference)
        access = order_access(order)
        server = {"order": order.reference, "state": order.state, "nodes": access.nodes,
                  "storage": _storage(access.storage, storage_for(order)),
                  "acceptance": acceptance_report(order), "health": order_last_health(order)}
        return Response(so.ServerOutputSerializer(server).data)


def _storage(result, view) -> dict | None:
    """The bucket as the storage step recorded it, with its state now (never a secret)."""
    if result is None:
        return None
    return {**asdict(result), "state": view.state if view else "",
            "retain_until": view.retain_until if view else None,
            "secret_revealable": bool(view and view.secret_revealable)}


class ServerActionView(APIView):
    action_name = ""  # "reboot" or "redeploy"
    services = {"reboot": day2.server_reboot,
                "redeploy": day2.server_redeploy_stack}

    def post(self, request, reference: str):
        run = self.services[self.action_name](order=_order(request, reference), by=request.user)
        return Response(so.RunOutputSerializer(run).data, status=status.HTTP_202_ACCEPTED)


class ServerRebootView(ServerActionView):
    action_name = "reboot"

    @extend_schema(operation_id="servers_reboot", request=None,
                   responses={202: so.RunOutputSerializer, 409: CONFLICT},
                   summary="Reboot the order's active servers")
    def post(self, request, reference: str):
        return super().post(request, reference)


class ServerRedeployView(ServerActionView):
    action_name = "redeploy"

    @extend_schema(operation_id="servers_redeploy", request=None,
                   responses={202: so.RunOutputSerializer, 409: CONFLICT},
                   summary="Re-deploy the training stack on the order's active servers")
    def post(self, request, reference: str):
        return super().post(request, reference)
