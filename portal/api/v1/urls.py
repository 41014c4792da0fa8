from django.urls import path

from portal.api.v1.views import catalog, customers, keys, orders, quotes, sizing, ssh_keys, webhooks

app_name = "api-v1"
urlpatterns = [
    path("catalog", catalog.CatalogView.as_view(), name="catalog"),
    path("estimates", sizing.EstimateView.as_view(), name="estimates"),
    path("recommendations", sizing.RecommendationView.as_view(), name="recommendations"),
    path("quotes", quotes.QuoteListCreateView.as_view(), name="quotes"),
    path("quotes/<str:reference>", quotes.QuoteDetailView.as_view(), name="quote"),
    path("orders", orders.OrderListCreateView.as_view(), name="orders"),
    path("orders/<str:reference>", orders.OrderDetailView.as_view(), name="order"),
    path("orders/<str:reference>/cancel", orders.OrderCancelView.as_view(), name="order-cancel"),
    path("orders/<str:reference>/terminate", orders.OrderTerminateView.as_view(), name="order-terminate"),
    path("orders/<str:reference>/events", orders.OrderEventListView.as_view(), name="order-events"),
    path("orders/<str:reference>/server", orders.ServerDetailView.as_view(), name="server"),
    path("orders/<str:reference>/server/reboot", orders.ServerRebootView.as_view(), name="server-reboot"),
    path("orders/<str:reference>/server/redeploy", orders.ServerRedeployView.as_view(),
         name="server-redeploy"),
    path("customers", customers.CustomerListCreateView.as_view(), name="customers"),
    path("customers/<slug:slug>", customers.CustomerDetailView.as_view(), name="customer"),
    path("ssh-keys", ssh_keys.SSHKeyListCreateView.as_view(), name="ssh-keys"),
    path("ssh-keys/<int:key_id>", ssh_keys.SSHKeyDetailView.as_view(), name="ssh-key"),
    path("api-keys", keys.ApiKeyListCreateView.as_view(), name="api-keys"),
    path("api-keys/<str:prefix>/revoke", keys.ApiKeyRevokeView.as_view(), name="api-key-revoke"),
    path("api-keys/<str:prefix>/rotate", keys.ApiKeyRotateView.as_view(), name="api-key-rotate"),
    path("webhooks", webhooks.WebhookListCreateView.as_view(), name="webhooks"),
    path("webhooks/<str:reference>", webhooks.WebhookDetailView.as_view(), name="webhook"),
    path("webhooks/<str:reference>/rotate-secret", webhooks.WebhookRotateSecretView.as_view(),
         name="webhook-rotate-secret"),
    path("webhooks/<str:reference>/test", webhooks.WebhookTestView.as_view(), name="webhook-test"),
    path("webhooks/<str:reference>/deliveries", webhooks.WebhookDeliveryListView.as_view(),
         name="webhook-deliveries"),
]
