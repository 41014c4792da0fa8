"""What accounts tells the apps above it, as signals it declares (DESIGN.md: upward is a signal
of the lower app). Receivers connect in their own AppConfig.ready()."""

from django.dispatch import Signal

# Someone left organisations (removed, or their account deactivated): ``organisation_ids``,
# ``by``. Provisioning syncs the keys of those organisations' active servers.
members_left = Signal()
