"""annotation_step.trace_id loses its single-column index: the unique (trace, index) starts with the same
column and serves every look-up, join and cascade by trace, so the extra B-tree was only one more write per
imported step (docs/benchmarks.md, "Long thoughts").

The state changes as AlterField(db_index=False) says, but the database only drops the index: on SQLite
Django's AlterField would copy the whole step table into a new one (and the search index's triggers with
it, rebuilt after from every row) to drop one index.
"""

import django.db.models.deletion
from django.db import migrations, models


def _trace_indexes(schema_editor, model) -> list[str]:
    """The names of the plain (non-unique) indexes on exactly (trace_id), found by introspection: the name
    Django gave the index depends on the table's history."""
    connection = schema_editor.connection
    with connection.cursor() as cursor:
        constraints = connection.introspection.get_constraints(cursor, model._meta.db_table)
    return [
        name for name, c in constraints.items()
        if c["index"] and not c["unique"] and not c["primary_key"] and c["columns"] == ["trace_id"]
    ]


def drop_index(apps, schema_editor) -> None:
    model = apps.get_model("annotation", "Step")
    for name in _trace_indexes(schema_editor, model):
        schema_editor.execute(f"DROP INDEX {schema_editor.quote_name(name)}")


def restore_index(apps, schema_editor) -> None:
    model = apps.get_model("annotation", "Step")
    if not _trace_indexes(schema_editor, model):
        # The statement (and name) Django makes for a foreign key's own index.
        schema_editor.execute(schema_editor._create_index_sql(model, fields=[model._meta.get_field("trace")]))


class Migration(migrations.Migration):

    dependencies = [
        ("annotation", "0007_segment_thoughts"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.AlterField(
                    model_name="step",
                    name="trace",
                    field=models.ForeignKey(
                        db_index=False,
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="steps",
                        to="annotation.trace",
                    ),
                ),
            ],
            database_operations=[migrations.RunPython(drop_index, restore_index)],
        ),
    ]
