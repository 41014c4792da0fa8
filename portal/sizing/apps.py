from django.apps import AppConfig


class SizingConfig(AppConfig):
    name = "portal.sizing"
    label = "sizing"
    verbose_name = "Sizing"
