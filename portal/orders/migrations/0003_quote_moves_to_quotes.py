# Quote now lives in the quotes app (same table, orders_quote): Order.quote points there and
# the orders app forgets the model. State only: the database is already right.

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('orders', '0002_order'),
        ('quotes', '0001_initial'),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=[],
            state_operations=[
                migrations.AlterField(
                    model_name='order',
                    name='quote',
                    field=models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL,
                                            related_name='orders', to='quotes.quote'),
                ),
                migrations.DeleteModel(name='Quote'),
            ],
        ),
    ]
