"""PostgreSQL only: an index of a study's trace ids with their problem, so a text query reads the ids
(and the problem a statement match reaches) from the index, not the trace rows.

The text query keeps the traces of the study whose id is among the steps' or labels' matches or
whose problem matched (``search.filters.TraceSearchFilter.filter_q``): with no other filter that
needs only ``study_id``, ``id`` and ``problem_id``, and the trace rows (raw output, regime, meta)
are 87 MiB at 100,000 traces against 3 MiB of this index (docs/benchmarks.md). SQLite needs none:
its index ``trace_study_problem_model_idx`` holds the rowid already."""

from django.db import migrations

INDEX = "search_trace_study_ids"


def create(apps, schema_editor) -> None:
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(
            f'CREATE INDEX IF NOT EXISTS "{INDEX}" ON "annotation_trace" ("study_id") INCLUDE ("id", "problem_id")'
        )


def drop(apps, schema_editor) -> None:
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(f'DROP INDEX IF EXISTS "{INDEX}"')


class Migration(migrations.Migration):
    dependencies = [
        ("annotation", "0007_segment_thoughts"),
        ("search", "0003_scanners"),
    ]

    operations = [migrations.RunPython(create, drop)]
