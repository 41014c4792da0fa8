from django.urls import path

from provisioning.monitoring import views

app_name = "monitoring"
urlpatterns = [
    path("targets/<str:exporter>", views.targets, name="targets"),
    path("alerts", views.alerts, name="alerts"),
]
