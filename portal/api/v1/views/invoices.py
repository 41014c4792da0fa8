"""Issued invoices and credit notes of the caller's organisation (or a reseller's customer):
list, one as JSON, one as PDF. Read-only: an issued document never changes (any other method is
a 405); another organisation's is a 404."""

from django.http import HttpResponse
from django.shortcuts import get_object_or_404
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema
from rest_framework.renderers import JSONRenderer
from rest_framework.response import Response
from rest_framework.views import APIView

from portal.accounts.selectors import organisations_for
from portal.api.v1 import serializers_usage as su
from portal.api.v1.views.common import list_filters, own_organisation
from portal.api.v1.views.servers import FileRenderer
from portal.billing.documents import invoice_pdf
from portal.billing.models import Invoice


def _issued(user):
    return (Invoice.objects.filter(organisation__in=organisations_for(user), state=Invoice.State.ISSUED)
            .select_related("organisation", "credit_for").prefetch_related("lines__order"))


class InvoiceListView(APIView):
    @extend_schema(operation_id="invoices_list", parameters=[su.InvoiceQuerySerializer],
                   responses={200: su.InvoiceSerializer(many=True)},
                   summary="Issued invoices and credit notes, newest first (the last 36)")
    def get(self, request):
        customer = list_filters(su.InvoiceQuerySerializer, request).get("customer")
        organisation = (get_object_or_404(organisations_for(request.user), slug=customer)
                        if customer else own_organisation(request.user))
        rows = _issued(request.user).filter(organisation=organisation)[:36]
        return Response(su.InvoiceSerializer(rows, many=True).data)


class InvoiceDetailView(APIView):
    @extend_schema(operation_id="invoices_retrieve", responses={200: su.InvoiceSerializer},
                   summary="One issued invoice or credit note")
    def get(self, request, number: str):
        return Response(su.InvoiceSerializer(get_object_or_404(_issued(request.user), number=number)).data)


class InvoicePdfView(APIView):
    renderer_classes = [JSONRenderer, FileRenderer]

    @extend_schema(operation_id="invoices_pdf", responses={(200, "application/pdf"): OpenApiTypes.BINARY},
                   summary="One issued invoice or credit note as PDF")
    def get(self, request, number: str):
        invoice = get_object_or_404(_issued(request.user), number=number)
        response = HttpResponse(invoice_pdf(invoice), content_type="application/pdf")
        response["Content-Disposition"] = f'attachment; filename="{invoice.number}.pdf"'
        return response
