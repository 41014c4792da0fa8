from portal.catalog.models import StorageProvider
from portal.catalog.services import catalog_seed, load_seed


def test_storage_providers_seed_with_region_and_addressing_style(db):
    catalog_seed()
    rows = {p.slug: p for p in StorageProvider.objects.all()}
    assert set(rows) == {row["slug"] for row in load_seed()["storage"]}
    assert {p.kind for p in rows.values()} == {"minio", "wasabi", "b2", "aws", "custom"}
    for p in rows.values():
        assert p.addressing_style in {"path", "virtual"}, p.slug
        if p.kind != "custom":
            assert p.region, p.slug
    assert rows["minio"].addressing_style == "path"  # MinIO and loopback servers need path style
    assert (rows["b2"].region, rows["wasabi"].region) == ("us-west-004", "us-east-1")


def test_seed_holds_no_provider_credentials():
    for row in load_seed()["storage"]:
        assert not {k for k in row if "key" in k.lower() or "secret" in k.lower()}, row["slug"]
