from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("sources", "0007_source_summary_names"),
    ]

    operations = [
        migrations.AddField(
            model_name="collection",
            name="folder",
            field=models.CharField(
                blank=True,
                editable=False,
                help_text="Absolute folder the collection is bound to: `foundry sync` re-ingests it (changes in, deletions out). Set with `foundry collections bind` / `unbind`.",
                max_length=1024,
            ),
        ),
        migrations.AddField(
            model_name="collection",
            name="sync_error",
            field=models.TextField(
                blank=True,
                editable=False,
                help_text="Why the last sync of the bound folder failed; empty when it worked.",
            ),
        ),
        migrations.AddField(
            model_name="collection",
            name="synced_at",
            field=models.DateTimeField(
                blank=True,
                editable=False,
                help_text="When the bound folder was last synced (its ingest job started).",
                null=True,
            ),
        ),
    ]
