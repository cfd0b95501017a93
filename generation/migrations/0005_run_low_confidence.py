"""Low confidence becomes what the run decided when it wrote the document, not a reading of today's settings."""

from django.conf import settings
from django.db import migrations, models


def mark_existing(apps, schema_editor) -> None:
    # Runs written before this field: the best record of their threshold is the configured one.
    GenerationRun = apps.get_model("generation", "GenerationRun")
    GenerationRun.objects.filter(status="succeeded", coverage__lt=settings.FOUNDRY.generation.min_coverage).update(
        low_confidence=True
    )


class Migration(migrations.Migration):
    dependencies = [
        ("generation", "0004_run_grounding"),
    ]

    operations = [
        migrations.AddField(
            model_name="generationrun",
            name="low_confidence",
            field=models.BooleanField(
                default=False,
                editable=False,
                help_text="Coverage was below generation.min_coverage when the document was written: the document says so under its title.",
            ),
        ),
        migrations.RunPython(mark_existing, migrations.RunPython.noop),
    ]
