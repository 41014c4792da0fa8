from django.apps import AppConfig


class ProvisioningConfig(AppConfig):
    name = "provisioning"
    label = "provisioning"
    verbose_name = "Provisioning"

    def order_email_lines(self, *, order, event) -> list[str]:
        """What the "active" e-mail says about access (see portal.orders.notifications)."""
        if event.to_state != "active":
            return []
        from provisioning.ssh_keys import active_email_lines  # apps load before models

        return active_email_lines(order)
