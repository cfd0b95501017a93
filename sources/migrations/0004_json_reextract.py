"""JSON sources are extracted again on their next ingest.

Before this release a JSON block's lines could be those of a later value (a number was
looked for after the values of the object around it, so "12" could be found in a
"120 Ohm" further down), and numbers were stored as Python prints them ("1e3" as
"1000.0"). The file's bytes did not change, so ingest would keep those chunks; forgetting
the recorded sha256 of every JSON source makes the next ingest read each one again,
as if it had changed. Nothing is deleted here: until that ingest the old chunks stay
searchable.
"""

from __future__ import annotations

from typing import Any

from django.db import migrations


def forget_json_digests(apps: Any, schema_editor: Any) -> None:
    Source = apps.get_model("sources", "Source")
    Source.objects.filter(kind="json").update(sha256="")


class Migration(migrations.Migration):
    dependencies = [
        ("sources", "0003_source_chunking"),
    ]

    operations = [
        migrations.RunPython(forget_json_digests, migrations.RunPython.noop),
    ]
