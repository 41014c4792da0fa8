"""Reusable parts of the storage fixtures (move to tests/conftest.py as a plugin when wanted).

``embedded_s3``: one moto S3+IAM server on loopback for the whole test run, IAM authorisation
enforced after the admin user is set up. Under CI=true a missing moto fails; elsewhere skips.
``storage_provider``: the catalog's on-site provider pointed at that server, with a bucket
prefix of its own per test (the server is shared, bucket names are global)."""

import uuid

import pytest

from tests.conftest import missing_service


@pytest.fixture(scope="session")
def embedded_s3():
    try:
        import moto.server  # noqa: F401
        import werkzeug  # noqa: F401
    except ImportError as exc:
        missing_service(f"moto[server] is not installed ({exc.name}): pip install -e '.[dev]'")
    from provisioning.storage.embedded import start_embedded_s3

    server = start_embedded_s3(enforce_auth=True)
    yield server
    server.stop()


@pytest.fixture
def storage_provider(embedded_s3, settings, catalog):
    from portal.catalog.models import StorageProvider

    prefix = f"t{uuid.uuid4().hex[:8]}"
    settings.STORAGE_BUCKET_PREFIX = prefix
    settings.STORAGE_CREDENTIAL_PROPAGATION_S = 2
    settings.STORAGE_PROVIDERS = {
        **settings.STORAGE_PROVIDERS,
        "minio": embedded_s3.provider_settings(canary_bucket=f"{prefix}-canary"),
    }
    return StorageProvider.objects.get(slug="minio")


@pytest.fixture
def admin_s3(embedded_s3):
    from provisioning.storage.s3ops import make_client

    return make_client("s3", endpoint_url=embedded_s3.endpoint_url, region="us-east-1",
                       access_key=embedded_s3.access_key, secret_key=embedded_s3.secret_key)


@pytest.fixture
def admin_iam(embedded_s3):
    from provisioning.storage.s3ops import make_client

    return make_client("iam", endpoint_url=embedded_s3.endpoint_url, region="us-east-1",
                       access_key=embedded_s3.access_key, secret_key=embedded_s3.secret_key)
