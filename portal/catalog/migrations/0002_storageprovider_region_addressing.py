from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('catalog', '0001_initial'),
    ]

    operations = [
        migrations.AddField(
            model_name='storageprovider',
            name='region',
            field=models.CharField(blank=True, help_text="S3 region, e.g. us-east-1; blank: the provider's default.", max_length=40),
        ),
        migrations.AddField(
            model_name='storageprovider',
            name='addressing_style',
            field=models.CharField(choices=[('path', 'Path (https://endpoint/bucket)'), ('virtual', 'Virtual host (https://bucket.endpoint)')], default='path', max_length=8),
        ),
    ]
