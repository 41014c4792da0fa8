import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models

import portal.core.crypto

STATES = [('active', 'Active'), ('retained', 'Retained'), ('deleted', 'Deleted')]


class Migration(migrations.Migration):

    dependencies = [
        ('catalog', '0002_storageprovider_region_addressing'),
        ('orders', '0002_order'),
        ('provisioning', '0003_runs_events'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.CreateModel(
            name='Bucket',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('name', models.CharField(max_length=63)),
                ('managed', models.BooleanField(default=True, help_text="False: the customer's own bucket (we never delete it).")),
                ('region', models.CharField(blank=True, max_length=40)),
                ('endpoint', models.CharField(blank=True, help_text='What the customer uses.', max_length=255)),
                ('state', models.CharField(choices=STATES, db_index=True, default='active', max_length=10)),
                ('state_changed_at', models.DateTimeField(auto_now_add=True)),
                ('retain_until', models.DateTimeField(blank=True, db_index=True, null=True)),
                ('settings_skipped', models.JSONField(blank=True, default=list, help_text='Settings the provider does not offer.')),
                ('created_at', models.DateTimeField(auto_now_add=True)),
                ('order', models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='buckets', to='orders.order')),
                ('provider', models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='buckets', to='catalog.storageprovider')),
            ],
            options={'ordering': ['-created_at', '-pk']},
        ),
        migrations.CreateModel(
            name='BucketEvent',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('at', models.DateTimeField(auto_now_add=True)),
                ('transition', models.CharField(max_length=20)),
                ('from_state', models.CharField(choices=STATES, max_length=10)),
                ('to_state', models.CharField(choices=STATES, max_length=10)),
                ('note', models.TextField(blank=True)),
                ('actor', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to=settings.AUTH_USER_MODEL)),
                ('bucket', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='events', to='provisioning.bucket')),
            ],
            options={'ordering': ['at', 'pk']},
        ),
        migrations.CreateModel(
            name='Credential',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('access_key_id', models.CharField(max_length=128)),
                ('secret', portal.core.crypto.EncryptedTextField(blank=True)),
                ('handle', models.CharField(blank=True, help_text='What the provider needs to revoke it (IAM user, key id).', max_length=128)),
                ('active', models.BooleanField(default=True)),
                ('created_at', models.DateTimeField(auto_now_add=True)),
                ('verified_at', models.DateTimeField(blank=True, null=True)),
                ('revealed_at', models.DateTimeField(blank=True, null=True)),
                ('revoked_at', models.DateTimeField(blank=True, null=True)),
                ('bucket', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='credentials', to='provisioning.bucket')),
            ],
            options={'ordering': ['-created_at', '-pk']},
        ),
        migrations.AddConstraint(
            model_name='bucket',
            constraint=models.UniqueConstraint(fields=('order',), name='one_bucket_per_order'),
        ),
        migrations.AddConstraint(
            model_name='bucket',
            constraint=models.UniqueConstraint(condition=models.Q(('managed', True)), fields=('name',), name='managed_bucket_name_unique'),
        ),
        migrations.AddConstraint(
            model_name='credential',
            constraint=models.UniqueConstraint(condition=models.Q(('active', True)), fields=('bucket',), name='one_active_credential_per_bucket'),
        ),
    ]
