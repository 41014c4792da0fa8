"""Plans stored before a plan's model_spec carried its Hugging Face model_type get it written once,
by the rules the stacks used then (the family; Mixtral's experts, Qwen2's q/k/v biases without an
output bias, a model name that starts with "mistral"), so that from now on nothing reads the
architecture off a name. Frozen: no import of the app's code."""

from django.db import migrations


def legacy_model_type(plan: dict) -> str | None:
    spec = plan.get("model_spec")
    if not isinstance(spec, dict) or spec.get("model_type") or not isinstance(spec.get("family"), str):
        return None
    family = spec["family"]
    if family in ("gpt2", "bert"):
        return family
    if family != "llama":
        return None
    name = plan.get("model").strip().lower() if isinstance(plan.get("model"), str) else ""
    if spec.get("num_experts"):
        return "mixtral"
    if spec.get("qkv_bias") and not spec.get("o_bias"):
        return "qwen2"
    if name.startswith("mistral") or name.rsplit("/", 1)[-1].startswith("mistral"):
        return "mistral"
    return "llama"


def fill(model):
    def run(apps, schema_editor):
        table = apps.get_model(*model.split("."))
        changed = []
        for row in table.objects.exclude(plan={}).only("pk", "plan").iterator(chunk_size=2000):
            if isinstance(row.plan, dict) and (model_type := legacy_model_type(row.plan)):
                row.plan = {**row.plan, "model_spec": {**row.plan["model_spec"], "model_type": model_type}}
                changed.append(row)
        table.objects.bulk_update(changed, ["plan"], batch_size=500)
    return run


class Migration(migrations.Migration):

    dependencies = [
        ("quotes", "0003_quote_org_newest_index"),
    ]

    operations = [
        migrations.RunPython(fill("quotes.Quote"), migrations.RunPython.noop),
    ]
