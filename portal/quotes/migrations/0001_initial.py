# Quote moves from the orders app to this one. The table stays `orders_quote` (made by
# orders.0001_initial), so this migration only changes Django's state: no data moves.

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models

import portal.quotes.models


class Migration(migrations.Migration):

    initial = True

    dependencies = [
        ('accounts', '0001_initial'),
        ('catalog', '0001_initial'),
        ('orders', '0002_order'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=[],
            state_operations=[
                migrations.CreateModel(
                    name='Quote',
                    fields=[
                        ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                        ('reference', models.CharField(default=portal.quotes.models._quote_reference, editable=False, max_length=12, unique=True)),
                        ('node_count', models.PositiveSmallIntegerField(default=1)),
                        ('storage_tb', models.PositiveIntegerField(default=0)),
                        ('plan', models.JSONField(blank=True, default=dict, help_text='Sizing plan snapshot the configuration came from.')),
                        ('price_lines', models.JSONField(blank=True, default=list, help_text='[{label, hourly, monthly}] at quote time.')),
                        ('price_hourly', models.DecimalField(decimal_places=2, max_digits=10)),
                        ('price_monthly', models.DecimalField(decimal_places=2, max_digits=12)),
                        ('currency', models.CharField(default='USD', max_length=3)),
                        ('valid_until', models.DateTimeField(default=portal.quotes.models._default_valid_until)),
                        ('created_at', models.DateTimeField(auto_now_add=True)),
                        ('created_by', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, to=settings.AUTH_USER_MODEL)),
                        ('network', models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, to='catalog.networkoption')),
                        ('nvme', models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, to='catalog.nvmeoption')),
                        ('organisation', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='quotes', to='accounts.organisation')),
                        ('sku', models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, to='catalog.serversku')),
                        ('storage_provider', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.PROTECT, to='catalog.storageprovider')),
                        ('strategy', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.PROTECT, related_name='+', to='catalog.stackoption')),
                        ('tracker', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.PROTECT, related_name='+', to='catalog.stackoption')),
                    ],
                    options={
                        'db_table': 'orders_quote',
                        'ordering': ['-created_at'],
                    },
                ),
            ],
        ),
    ]
