from django.apps import AppConfig


class WebhooksConfig(AppConfig):
    name = "portal.webhooks"
    label = "webhooks"
    verbose_name = "Webhooks"
