from django.urls import path

from portal.billing import views

app_name = "billing"
urlpatterns = [
    path("", views.billing_home, name="home"),
    path("<slug:slug>/", views.organisation_billing, name="organisation"),
    path("<slug:slug>/limit/", views.spend_limit, name="limit"),
    path("<slug:slug>/profile/", views.billing_profile, name="profile"),
    path("<slug:slug>/statement.csv", views.usage_statement, name="statement"),
    path("<slug:slug>/invoices/<str:number>/", views.invoice_detail, name="invoice"),
    path("<slug:slug>/invoices/<str:number>/pdf", views.invoice_pdf_download, name="invoice-pdf"),
    path("<slug:slug>/invoices/<str:number>/csv", views.invoice_csv_download, name="invoice-csv"),
]
