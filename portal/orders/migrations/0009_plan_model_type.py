"""Orders' stored plans get their model_type, as quotes' do (quotes migration 0004, whose frozen
rules this reuses: both are frozen together)."""

import importlib

from django.db import migrations

_quotes = importlib.import_module("portal.quotes.migrations.0004_plan_model_type")


class Migration(migrations.Migration):

    dependencies = [
        ("orders", "0008_order_newest_first_indexes"),
        ("quotes", "0004_plan_model_type"),
    ]

    operations = [
        migrations.RunPython(_quotes.fill("orders.Order"), migrations.RunPython.noop),
    ]
