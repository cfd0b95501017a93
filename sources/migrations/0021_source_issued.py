from django.db import migrations, models


class Migration(migrations.Migration):
    """The date a document gives itself (PDF, Office and HTML metadata), a ranking feature with its
    file's modification time standing in. Sources ingested before keep None until their file changes
    (re-reading every file costs its embedding again): their modification time dates them meanwhile."""

    dependencies = [("sources", "0020_chunk_line_map")]

    operations = [
        migrations.AddField(
            model_name="source",
            name="issued",
            field=models.DateTimeField(
                blank=True,
                editable=False,
                help_text="The date the document gives itself in its metadata (last modified, else created); "
                "empty when it gives none.",
                null=True,
            ),
        ),
    ]
