from django.urls import path, register_converter
from django.urls.converters import StringConverter

from portal.api.v1.views import (
    catalog,
    customers,
    invitations,
    invoices,
    keys,
    metrics,
    orders,
    quotes,
    servers,
    sizing,
    ssh_keys,
    usage,
    webhooks,
)


class Reference(StringConverter):
    """A quote's, order's or webhook's reference (Q-…, O-…, WH-…): anything else is no endpoint."""

    regex = "[A-Z]{1,2}-[0-9A-F]{8}"


class KeyPrefix(StringConverter):
    regex = "[0-9a-f]{8}"


class Hostname(StringConverter):
    regex = "[A-Za-z0-9][A-Za-z0-9.-]{0,119}"


class FileName(StringConverter):
    regex = "[A-Za-z0-9][A-Za-z0-9._-]{0,99}"


class Slug(StringConverter):
    """Django's slug converter, named so that the schema shows its pattern (drf-spectacular
    gives a registered converter's regex as the parameter's ``pattern``; Django's own ``slug``
    is a plain string there)."""

    regex = "[-a-zA-Z0-9_]+"


CONVERTERS = {"reference": Reference, "key_prefix": KeyPrefix, "hostname": Hostname, "file_name": FileName,
              "org_slug": Slug}
for _name, _converter in CONVERTERS.items():
    register_converter(_converter, _name)

app_name = "api-v1"
urlpatterns = [
    path("catalog", catalog.CatalogView.as_view(), name="catalog"),
    path("estimates", sizing.EstimateView.as_view(), name="estimates"),
    path("recommendations", sizing.RecommendationView.as_view(), name="recommendations"),
    path("quotes", quotes.QuoteListCreateView.as_view(), name="quotes"),
    path("quotes/<reference:reference>", quotes.QuoteDetailView.as_view(), name="quote"),
    path("orders", orders.OrderListCreateView.as_view(), name="orders"),
    path("orders/<reference:reference>", orders.OrderDetailView.as_view(), name="order"),
    path("orders/<reference:reference>/cancel", orders.OrderCancelView.as_view(), name="order-cancel"),
    path("orders/<reference:reference>/terminate", orders.OrderTerminateView.as_view(),
         name="order-terminate"),
    path("orders/<reference:reference>/events", orders.OrderEventListView.as_view(), name="order-events"),
    path("orders/<reference:reference>/server", orders.ServerDetailView.as_view(), name="server"),
    path("orders/<reference:reference>/server/reboot", orders.ServerRebootView.as_view(),
         name="server-reboot"),
    path("orders/<reference:reference>/server/redeploy", orders.ServerRedeployView.as_view(),
         name="server-redeploy"),
    path("orders/<reference:reference>/storage/read-only-key", servers.RetainedKeyView.as_view(),
         name="order-storage-read-key"),
    path("orders/<reference:reference>/storage/read-only-key/reveal",
         servers.RetainedKeyRevealView.as_view(), name="order-storage-read-key-reveal"),
    path("orders/<reference:reference>/server/storage/reveal", servers.StorageRevealView.as_view(),
         name="server-storage-reveal"),
    path("orders/<reference:reference>/server/storage/rotate", servers.StorageRotateView.as_view(),
         name="server-storage-rotate"),
    path("orders/<reference:reference>/server/stack-files", servers.StackFileListView.as_view(),
         name="server-stack-files"),
    path("orders/<reference:reference>/server/stack-files/<hostname:hostname>/<file_name:name>",
         servers.StackFileDownloadView.as_view(), name="server-stack-file"),
    path("customers", customers.CustomerListCreateView.as_view(), name="customers"),
    path("customers/<org_slug:slug>", customers.CustomerDetailView.as_view(), name="customer"),
    path("customers/<org_slug:slug>/invitations", invitations.InvitationListCreateView.as_view(),
         name="customer-invitations"),
    path("ssh-keys", ssh_keys.SSHKeyListCreateView.as_view(), name="ssh-keys"),
    path("ssh-keys/<int:key_id>", ssh_keys.SSHKeyDetailView.as_view(), name="ssh-key"),
    path("api-keys", keys.ApiKeyListCreateView.as_view(), name="api-keys"),
    path("api-keys/<key_prefix:prefix>/revoke", keys.ApiKeyRevokeView.as_view(), name="api-key-revoke"),
    path("api-keys/<key_prefix:prefix>/rotate", keys.ApiKeyRotateView.as_view(), name="api-key-rotate"),
    path("webhooks", webhooks.WebhookListCreateView.as_view(), name="webhooks"),
    path("webhooks/<reference:reference>", webhooks.WebhookDetailView.as_view(), name="webhook"),
    path("webhooks/<reference:reference>/rotate-secret", webhooks.WebhookRotateSecretView.as_view(),
         name="webhook-rotate-secret"),
    path("webhooks/<reference:reference>/test", webhooks.WebhookTestView.as_view(), name="webhook-test"),
    path("webhooks/<reference:reference>/deliveries", webhooks.WebhookDeliveryListView.as_view(),
         name="webhook-deliveries"),
    path("usage", usage.UsageView.as_view(), name="usage"),
    path("invoices", invoices.InvoiceListView.as_view(), name="invoices"),
    path("invoices/<str:number>", invoices.InvoiceDetailView.as_view(), name="invoice"),
    path("invoices/<str:number>/pdf", invoices.InvoicePdfView.as_view(), name="invoice-pdf"),
    path("orders/<reference:reference>/server/metrics", metrics.ServerMetricsView.as_view(),
         name="server-metrics"),
]
