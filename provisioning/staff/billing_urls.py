"""Billing's staff pages, included at /ops/billing/ by ``portal/urls.py``; the namespace stays
``billing-staff`` (the names the templates and the navigation reverse)."""

from django.urls import path

from provisioning.staff import billing_views

app_name = "billing-staff"
urlpatterns = [
    path("", billing_views.staff_billing, name="home"),
    path("close/", billing_views.staff_close_month, name="close"),
    path("invoices/<int:pk>/", billing_views.staff_invoice, name="invoice"),
    path("invoices/<int:pk>/finalise/", billing_views.staff_invoice_finalise, name="finalise"),
    path("invoices/<int:pk>/credit-note/", billing_views.staff_credit_note, name="credit-note"),
]
