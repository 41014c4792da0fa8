from django.apps import AppConfig


class QuotesConfig(AppConfig):
    name = "portal.quotes"
    label = "quotes"
    verbose_name = "Quotes and configurator"
