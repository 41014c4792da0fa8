from django.urls import path

from portal.orders import configurator_views as views

app_name = "configurator"
urlpatterns = [
    path("", views.configure, name="configure"),
    path("price/", views.price, name="price"),
    path("quotes/<str:reference>/", views.quote_detail, name="quote"),
]
