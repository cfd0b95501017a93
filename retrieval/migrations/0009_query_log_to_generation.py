"""The query log (QueryLog, Conversation, QueryFeedback) is generation's: generation writes it.

State only: the tables and their rows stay where they are; ``generation.0007_query_log`` takes
the models over under the same table names.
"""

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [
        ("retrieval", "0008_conversation"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.DeleteModel(name="QueryFeedback"),
                migrations.DeleteModel(name="QueryLog"),
                migrations.DeleteModel(name="Conversation"),
            ],
        ),
    ]
