from django.apps import AppConfig


class ProvisioningConfig(AppConfig):
    name = "provisioning"
    label = "provisioning"
    verbose_name = "Provisioning"

    def ready(self):
        from provisioning import receivers  # models are loaded only once apps are ready
        from provisioning.fulfilment import tasks  # noqa: F401 (registers the beat task)

        receivers.connect()
