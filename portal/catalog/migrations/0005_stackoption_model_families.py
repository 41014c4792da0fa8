import portal.catalog.models
from django.db import migrations, models

# What the seed declares (portal/catalog/data/catalog.json) as of this migration, so a catalog that
# is not seeded again still says which model architectures each stack builds. torchtitan 0.2.2
# builds its own model definitions; of those the portal sizes llama3 (8B / 70B / 405B). Rows keep
# their id; a row another operator added keeps the defaults (builds no family until declared).
HUGGING_FACE = ["llama3", "llama", "mistral", "mixtral", "qwen2", "gpt2", "bert"]
FAMILIES = {"ddp": HUGGING_FACE, "fsdp": HUGGING_FACE, "deepspeed": HUGGING_FACE,
            "torchtitan": ["llama3"]}


def declare_families(apps, schema_editor):
    StackOption = apps.get_model("catalog", "StackOption")
    for slug, families in FAMILIES.items():
        StackOption.objects.filter(slug=slug, kind="strategy").update(
            model_families=families, op_level_checkpointing=slug == "torchtitan")


class Migration(migrations.Migration):

    dependencies = [
        ('catalog', '0004_serversku_nccl_busbw_gbps'),
    ]

    operations = [
        migrations.AddField(
            model_name='stackoption',
            name='model_families',
            field=models.JSONField(blank=True, default=list, help_text='The model architectures the stack builds, e.g. ["llama3"] (torchtitan); names in catalog/capabilities.py.', validators=[portal.catalog.models._validate_model_families]),
        ),
        migrations.AddField(
            model_name='stackoption',
            name='op_level_checkpointing',
            field=models.BooleanField(default=False, help_text='Saves chosen ops\' outputs and recomputes the rest (torchtitan\'s selective_ac_option = "op"); the plan\'s checkpointing selective-op.', verbose_name='op-level selective checkpointing'),
        ),
        migrations.RunPython(declare_families, migrations.RunPython.noop),
    ]
