from django.apps import AppConfig


class OrdersConfig(AppConfig):
    name = "portal.orders"
    label = "orders"
    verbose_name = "Orders"
