from django.urls import path

from portal.quotes import views

app_name = "quotes"
urlpatterns = [
    path("", views.configure, name="configure"),
    path("price/", views.price, name="price"),
    path("quotes/<str:reference>/", views.quote_detail, name="quote"),
]
