"""A run written with low confidence is not "succeeded": it gets its own status, "needs review"."""

from django.db import migrations, models


def to_needs_review(apps, schema_editor) -> None:
    GenerationRun = apps.get_model("generation", "GenerationRun")
    GenerationRun.objects.filter(status="succeeded", low_confidence=True).update(status="needs_review")


def to_succeeded(apps, schema_editor) -> None:
    GenerationRun = apps.get_model("generation", "GenerationRun")
    GenerationRun.objects.filter(status="needs_review").update(status="succeeded")


class Migration(migrations.Migration):
    dependencies = [
        ("generation", "0005_run_low_confidence"),
    ]

    operations = [
        migrations.AlterField(
            model_name="generationrun",
            name="status",
            field=models.CharField(
                choices=[
                    ("pending", "Pending"),
                    ("running", "Running"),
                    ("succeeded", "Succeeded"),
                    ("needs_review", "Needs review"),
                    ("failed", "Failed"),
                ],
                db_index=True,
                default="pending",
                max_length=20,
            ),
        ),
        migrations.RunPython(to_needs_review, to_succeeded),
    ]
