"""The audit chain (generation/audit_chain.py): a place and a hash on every QueryLog row and finished
GenerationRun, one head per chain; the rows already logged are chained here, oldest first.

Both columns are nullable without a default, so SQLite adds them in place (``ALTER TABLE ADD COLUMN``) and
the unique places are unique indexes (the constraint in the models' state): no table of the audit trail is rebuilt. Asking users become PROTECT
(no SQL): a user named in a hashed row is deactivated, never deleted, or the row would change.
"""

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models

from generation.audit_chain import FIELDS, GENESIS, QUERIES, RUNS, digest

FINISHED = ("succeeded", "needs_review", "failed")


def _chain(model, head_model, chain: str, rows) -> None:
    previous, seq = GENESIS, 0
    for pk in rows.values_list("pk", flat=True):
        seq += 1
        model.objects.filter(pk=pk).update(chain_seq=seq)
        row = model.objects.filter(pk=pk).values(*FIELDS[chain]).get()
        previous = digest(previous, row)
        model.objects.filter(pk=pk).update(chain_hash=previous)
    head_model.objects.create(chain=chain, seq=seq, hash=previous)


def chain_existing(apps, schema_editor) -> None:
    QueryLog = apps.get_model("generation", "QueryLog")
    GenerationRun = apps.get_model("generation", "GenerationRun")
    Head = apps.get_model("generation", "AuditChainHead")
    _chain(QueryLog, Head, QUERIES, QueryLog.objects.order_by("pk"))
    runs = GenerationRun.objects.filter(status__in=FINISHED).order_by(
        models.F("finished_at").asc(nulls_first=True), "pk"
    )
    _chain(GenerationRun, Head, RUNS, runs)


class Migration(migrations.Migration):
    dependencies = [
        ("generation", "0007_query_log"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.CreateModel(
            name="AuditChainHead",
            fields=[
                ("chain", models.CharField(max_length=20, primary_key=True, serialize=False)),
                ("seq", models.PositiveBigIntegerField(default=0)),
                ("hash", models.CharField(max_length=64)),
            ],
        ),
        *[
            operation
            for model, table in (("querylog", "retrieval_querylog"), ("generationrun", "generation_generationrun"))
            for operation in (
                migrations.AddField(
                    model_name=model,
                    name="chain_seq",
                    field=models.PositiveBigIntegerField(
                        blank=True, editable=False, help_text="Place in the audit chain.", null=True
                    ),
                ),
                migrations.AddField(
                    model_name=model,
                    name="chain_hash",
                    field=models.CharField(
                        blank=True,
                        editable=False,
                        help_text="SHA-256 of the previous row's hash and this row's content "
                        "(generation/audit_chain.py).",
                        max_length=64,
                        null=True,
                    ),
                ),
                # SQLite's schema editor rebuilds a table for a unique constraint; a unique index is the same rule.
                migrations.SeparateDatabaseAndState(
                    state_operations=[
                        migrations.AddConstraint(
                            model_name=model,
                            constraint=models.UniqueConstraint(fields=("chain_seq",), name=f"{model}_chain_seq_unique"),
                        )
                    ],
                    database_operations=[
                        migrations.RunSQL(
                            f'CREATE UNIQUE INDEX "{model}_chain_seq_unique" ON "{table}" ("chain_seq")',
                            f'DROP INDEX "{model}_chain_seq_unique"',
                        )
                    ],
                ),
            )
        ],
        migrations.AlterField(
            model_name="querylog",
            name="user",
            field=models.ForeignKey(
                blank=True,
                editable=False,
                null=True,
                on_delete=django.db.models.deletion.PROTECT,
                related_name="queries",
                to=settings.AUTH_USER_MODEL,
            ),
        ),
        migrations.AlterField(
            model_name="generationrun",
            name="created_by",
            field=models.ForeignKey(
                blank=True,
                editable=False,
                null=True,
                on_delete=django.db.models.deletion.PROTECT,
                to=settings.AUTH_USER_MODEL,
            ),
        ),
        migrations.RunPython(chain_existing, migrations.RunPython.noop),
    ]
