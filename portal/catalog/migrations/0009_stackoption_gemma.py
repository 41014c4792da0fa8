from django.db import migrations
from django.db.models import F

# The Hugging Face stacks (transformers 5.24 has Gemma and Gemma 3) build them as they build
# Phi-3: a catalog that is not seeded again learns them here. Frozen: only rows that already build
# phi3 gain them, after it.
ADDED = ["gemma", "gemma3_text"]
BESIDE = "phi3"


def _bump_catalog_version(apps) -> None:
    """Processes that keep the catalog in memory reload it (portal/catalog/cache.py)."""
    CatalogVersion = apps.get_model("catalog", "CatalogVersion")
    CatalogVersion.objects.get_or_create(pk=1)
    CatalogVersion.objects.filter(pk=1).update(version=F("version") + 1)


def add_families(apps, schema_editor):
    StackOption = apps.get_model("catalog", "StackOption")
    for stack in StackOption.objects.filter(kind="strategy"):
        families = list(stack.model_families or [])
        if BESIDE in families:
            at = families.index(BESIDE) + 1
            families[at:at] = [f for f in ADDED if f not in families]
            stack.model_families = families
            stack.save(update_fields=["model_families"])
    _bump_catalog_version(apps)


def remove_families(apps, schema_editor):
    """Back to code that does not know them: no row keeps them, wherever an operator put them."""
    StackOption = apps.get_model("catalog", "StackOption")
    for stack in StackOption.objects.filter(kind="strategy"):
        if set(ADDED) & set(stack.model_families or []):
            stack.model_families = [f for f in stack.model_families if f not in ADDED]
            stack.save(update_fields=["model_families"])
    _bump_catalog_version(apps)


class Migration(migrations.Migration):

    dependencies = [
        ("catalog", "0008_stackoption_qwen3_phi3"),
    ]

    operations = [
        migrations.RunPython(add_families, remove_families),
    ]
