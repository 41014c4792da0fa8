from django.db import migrations
from django.db.models import F

# The Hugging Face stacks (transformers 5.24 has Gemma 2) build it as they build Gemma: a catalog
# that is not seeded again learns it here. Frozen: only rows that already build gemma gain it,
# after it.
ADDED = ["gemma2"]
BESIDE = "gemma"


def _bump_catalog_version(apps) -> None:
    """Processes that keep the catalog in memory reload it (portal/catalog/cache.py)."""
    CatalogVersion = apps.get_model("catalog", "CatalogVersion")
    CatalogVersion.objects.get_or_create(pk=1)
    CatalogVersion.objects.filter(pk=1).update(version=F("version") + 1)


def add_families(apps, schema_editor):
    StackOption = apps.get_model("catalog", "StackOption")
    for stack in StackOption.objects.filter(kind="strategy"):
        families = list(stack.model_families or [])
        if BESIDE in families and not set(ADDED) <= set(families):
            at = families.index(BESIDE) + 1
            families[at:at] = [f for f in ADDED if f not in families]
            stack.model_families = families
            stack.save(update_fields=["model_families"])
    _bump_catalog_version(apps)


def remove_families(apps, schema_editor):
    """Back to code that does not know it: no row keeps it, wherever an operator put it."""
    StackOption = apps.get_model("catalog", "StackOption")
    for stack in StackOption.objects.filter(kind="strategy"):
        if set(ADDED) & set(stack.model_families or []):
            stack.model_families = [f for f in stack.model_families if f not in ADDED]
            stack.save(update_fields=["model_families"])
    _bump_catalog_version(apps)


class Migration(migrations.Migration):

    dependencies = [
        ("catalog", "0009_stackoption_gemma"),
    ]

    operations = [
        migrations.RunPython(add_families, remove_families),
    ]
