"""What orders asks of the apps above it, as signals it declares (DESIGN.md: upward is a signal
of the lower app). Receivers connect in their own AppConfig.ready()."""

from django.dispatch import Signal

# An order e-mail is being written: ``order``, ``event``. A receiver returns paragraphs (a list
# of lines) to add, e.g. provisioning's "how to log in" in the "active" e-mail.
order_email_lines = Signal()
