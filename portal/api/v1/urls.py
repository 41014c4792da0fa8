from django.urls import path

from portal.api.v1 import views

app_name = "api-v1"
urlpatterns = [
    path("estimates", views.EstimateView.as_view(), name="estimates"),
    path("recommendations", views.RecommendationView.as_view(), name="recommendations"),
    path("quotes", views.QuoteCreateView.as_view(), name="quotes"),
    path("quotes/<str:reference>", views.QuoteDetailView.as_view(), name="quote"),
]
