"""Object storage for orders: S3-compatible buckets with scoped keys (docs/storage.md).

Adapters (one per provider kind, chosen by dotted path in ``settings.STORAGE_PROVIDER_ADAPTERS``)
do the I/O; :mod:`provisioning.storage.services` decides and records. ``sync.py`` is the
node-side checkpoint sync tool and imports nothing from here.
"""
