from django.urls import path  # noqa: F401

app_name = "api-v1"
urlpatterns: list = []
