"""Reads of webhook endpoints and their delivery log, for the API and the organisation pages."""

from django.db.models import QuerySet

from portal.accounts.selectors import organisations_for
from portal.webhooks.models import WebhookDelivery, WebhookEndpoint


def endpoints_visible_to(user, organisation=None) -> QuerySet[WebhookEndpoint]:
    """The endpoints of the organisations ``user`` sees (of ``organisation`` only, when given),
    newest first; anyone else's are not there (a 404 where one is looked up)."""
    endpoints = WebhookEndpoint.objects.filter(organisation__in=organisations_for(user))
    if organisation is not None:
        endpoints = endpoints.filter(organisation=organisation)
    return endpoints.select_related("organisation")


def deliveries_of(endpoint: WebhookEndpoint) -> QuerySet[WebhookDelivery]:
    """The endpoint's delivery log, newest first, each with its event and every attempt."""
    return (WebhookDelivery.objects.filter(endpoint=endpoint).select_related("event")
            .prefetch_related("log"))
