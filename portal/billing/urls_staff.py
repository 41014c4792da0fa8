from django.urls import path

from portal.billing import views_staff

app_name = "billing-staff"
urlpatterns = [
    path("", views_staff.staff_billing, name="home"),
    path("close/", views_staff.staff_close_month, name="close"),
    path("invoices/<int:pk>/", views_staff.staff_invoice, name="invoice"),
    path("invoices/<int:pk>/finalise/", views_staff.staff_invoice_finalise, name="finalise"),
    path("invoices/<int:pk>/credit-note/", views_staff.staff_credit_note, name="credit-note"),
]
