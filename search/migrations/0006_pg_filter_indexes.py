"""PostgreSQL only: two covering indexes for the structured filters a search combines with its text
query, so each side is an index-only scan (docs/benchmarks.md, the 100,000-trace study).

* ``search_trace_filters`` replaces search.0004's ``search_trace_study_ids``: a study's trace ids with
  their problem (what the text query needs) and the trace columns the filters read (model, answer,
  flag, number of steps, regime): 10 MiB at 100,000 traces, where the trace rows are 87 MiB (raw
  output, thought, answer, meta). ``wait`` with ``regime=temperature=0.7`` read every trace row
  (about 100 ms of a 240 ms query) before it.
* ``search_label_verdicts``: labels by kind and verdict with their step and author, for the verdict,
  first-error and labelled filters (``source=human|mine|annotator:X|judge:X|adjudicated``). They read
  every label row before it (200,000 at 100,000 traces, 40 ms): ``check`` + ``verdict=invalid``
  188 -> 111 ms, ``hmm`` + relative first error 216 -> 126 ms.

SQLite needs neither: its planner reads the trace rows by rowid and its label filters were measured
within their target (docs/benchmarks.md)."""

from django.db import migrations

OLD = "search_trace_study_ids"
TRACES = "search_trace_filters"
LABELS = "search_label_verdicts"


def create(apps, schema_editor) -> None:
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(
            f'CREATE INDEX IF NOT EXISTS "{TRACES}" ON "annotation_trace" ("study_id") '
            f'INCLUDE ("id", "problem_id", "model", "answer_correct", "flagged", "n_steps", "regime")'
        )
        schema_editor.execute(f'DROP INDEX IF EXISTS "{OLD}"')
        schema_editor.execute(
            f'CREATE INDEX IF NOT EXISTS "{LABELS}" ON "annotation_steplabel" ("kind", "verdict") '
            f'INCLUDE ("step_id", "annotator_id", "judge_id")'
        )


def drop(apps, schema_editor) -> None:
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(f'CREATE INDEX IF NOT EXISTS "{OLD}" ON "annotation_trace" ("study_id") INCLUDE ("id", "problem_id")')
        schema_editor.execute(f'DROP INDEX IF EXISTS "{TRACES}"')
        schema_editor.execute(f'DROP INDEX IF EXISTS "{LABELS}"')


class Migration(migrations.Migration):
    dependencies = [
        ("annotation", "0008_step_trace_no_index"),
        ("search", "0005_merge_trace_ids_index_and_scanner_failures"),
    ]

    operations = [migrations.RunPython(create, drop)]
