from django.urls import path

from portal.sizing import views

app_name = "sizing"
urlpatterns = [
    path("", views.wizard, name="wizard"),
    path("results/", views.results, name="results"),
]
