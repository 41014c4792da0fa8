from django.urls import path

from portal.billing import views

app_name = "billing"
urlpatterns = [
    path("", views.billing_home, name="home"),
    path("<slug:slug>/", views.organisation_billing, name="organisation"),
]
