"""Idempotency answers: kept per organisation for API keys (was: per key), bodies encrypted (they
carry new API keys and webhook secrets). Existing rows are converted, not dropped, so a retry of
a call made before the upgrade still replays."""

import json

import django.db.models.deletion
from django.db import migrations, models

import portal.core.crypto


def forwards(apps, schema_editor):
    Record = apps.get_model("api", "IdempotencyKey")
    ApiKey = apps.get_model("accounts", "ApiKey")
    seen = set()
    for row in Record.objects.order_by("created_at", "pk"):
        if row.principal.startswith("key:"):
            key = ApiKey.objects.filter(prefix=row.principal[4:]).first()
            if key is None:
                row.delete()
                continue
            row.scope, row.api_key_id = f"org:{key.organisation_id}", key.pk
        else:
            row.scope = row.principal
        if (row.scope, row.key) in seen:  # two keys of one organisation used the same key
            row.delete()
            continue
        seen.add((row.scope, row.key))
        row.response = json.dumps(row.response_body) if row.response_body is not None else ""
        row.save(update_fields=["scope", "api_key", "response"])


class Migration(migrations.Migration):

    dependencies = [
        ("accounts", "0003_ssh_keys"),
        ("api", "0001_initial"),
    ]

    operations = [
        migrations.AddField(
            model_name="idempotencykey", name="scope",
            field=models.CharField(default="", help_text="`org:<id>` (API keys) or `user:<id>` (a session).",
                                   max_length=64),
            preserve_default=False,
        ),
        migrations.AddField(
            model_name="idempotencykey", name="api_key",
            field=models.ForeignKey(blank=True, help_text="The key that made the first call.", null=True,
                                    on_delete=django.db.models.deletion.SET_NULL, related_name="+",
                                    to="accounts.apikey"),
        ),
        migrations.AddField(
            model_name="idempotencykey", name="response",
            field=portal.core.crypto.EncryptedTextField(blank=True, default="",
                                                        help_text="The JSON body, encrypted."),
        ),
        migrations.RemoveConstraint(model_name="idempotencykey", name="one_response_per_idempotency_key"),
        migrations.RunPython(forwards, migrations.RunPython.noop),
        migrations.RemoveField(model_name="idempotencykey", name="principal"),
        migrations.RemoveField(model_name="idempotencykey", name="response_body"),
        migrations.AddConstraint(
            model_name="idempotencykey",
            constraint=models.UniqueConstraint(fields=("scope", "key"),
                                               name="one_response_per_idempotency_scope_and_key"),
        ),
    ]
