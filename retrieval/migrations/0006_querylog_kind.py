from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("retrieval", "0005_querylog_grounding"),
    ]

    operations = [
        migrations.AddField(
            model_name="querylog",
            name="kind",
            field=models.CharField(
                choices=[("answer", "Answer"), ("search", "Search (passages only, no answer)")],
                default="answer",
                editable=False,
                help_text="A question answered (or refused), or a search that returned passages only.",
                max_length=8,
            ),
        ),
    ]
