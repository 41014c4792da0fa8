"""Builds the adapter for a catalog StorageProvider: dotted path by kind from
``settings.STORAGE_PROVIDER_ADAPTERS`` (or the provider's own ``adapter`` override in
``settings.STORAGE_PROVIDERS[slug]``), configured from the catalog row plus settings."""

from __future__ import annotations

from dataclasses import dataclass, field

from django.conf import settings
from django.utils.module_loading import import_string

from provisioning.drivers.base import DriverError
from provisioning.storage.base import BucketProvider, ProviderConfig


@dataclass(frozen=True)
class CustomAccess:
    """What a customer gives for their own S3 endpoint (kept encrypted on the order)."""

    endpoint_url: str
    bucket: str
    access_key_id: str
    secret_access_key: str = field(repr=False)
    region: str = ""


def provider_config(provider, *, custom: CustomAccess | None = None) -> ProviderConfig:
    entry = dict(settings.STORAGE_PROVIDERS.get(provider.slug) or {})
    options = {"canary_bucket": f"{settings.STORAGE_BUCKET_PREFIX}-canary", **entry.get("options", {})}
    if custom is not None:
        return ProviderConfig(
            slug=provider.slug, kind=provider.kind, endpoint_url=custom.endpoint_url,
            region=custom.region or provider.region, addressing_style=provider.addressing_style,
            access_key=custom.access_key_id, secret_key=custom.secret_access_key,
            options={"bucket": custom.bucket})
    return ProviderConfig(
        slug=provider.slug, kind=provider.kind,
        endpoint_url=entry.get("endpoint_url") or provider.endpoint_url,
        public_endpoint_url=entry.get("public_endpoint_url") or "",
        region=provider.region, addressing_style=provider.addressing_style,
        access_key=entry.get("access_key") or "", secret_key=entry.get("secret_key") or "",
        options=options)


def adapter_path(provider) -> str:
    entry = settings.STORAGE_PROVIDERS.get(provider.slug) or {}
    path = entry.get("adapter") or settings.STORAGE_PROVIDER_ADAPTERS.get(provider.kind)
    if not path:
        raise DriverError(f"no bucket provider adapter for {provider.name} (kind {provider.kind!r}): "
                          f"add it to STORAGE_PROVIDER_ADAPTERS", permanent=True)
    return path


def provider_for(provider, *, custom: CustomAccess | None = None) -> BucketProvider:
    """The adapter for ``provider`` (a catalog StorageProvider). Raises DriverError(permanent)
    when there is no adapter or no admin credentials, with a reason staff can act on."""
    path = adapter_path(provider)
    try:
        cls = import_string(path)
    except ImportError as exc:
        raise DriverError(f"bucket provider adapter {path!r} for {provider.name} cannot be "
                          f"imported: {exc}", permanent=True) from None
    if provider.kind == "custom" and custom is None:
        raise DriverError(f"{provider.name}: the order carries no endpoint, bucket and keys",
                          permanent=True)
    return cls(provider_config(provider, custom=custom))
