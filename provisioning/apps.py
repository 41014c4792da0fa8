from django.apps import AppConfig


class ProvisioningConfig(AppConfig):
    name = "provisioning"
    label = "provisioning"
    verbose_name = "Provisioning"
