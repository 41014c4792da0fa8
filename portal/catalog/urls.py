from django.urls import path

from portal.catalog import views

app_name = "catalog"
urlpatterns = [path("", views.catalog_list, name="list")]
