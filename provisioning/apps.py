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

    def members_changed(self, *, organisation_ids, by=None) -> None:
        """Someone left these organisations (removed, or their account deactivated): a key sync
        on their active servers, so the person's own keys stop opening them
        (see portal.accounts.team)."""
        from provisioning.ssh_keys import keys_sync  # apps load before models

        keys_sync(organisations=organisation_ids, by=by)
