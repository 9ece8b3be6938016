"""The full-text index (search/backends.py): on PostgreSQL a stored, generated tsvector column with
a GIN index on steps, problems and labels; on SQLite FTS5 tables with external content kept in
step by triggers. Each branch is a no-op on the other database."""

from django.db import migrations


def create(apps, schema_editor) -> None:
    from search.backends import ensure_index

    ensure_index(schema_editor.connection.alias)


def drop(apps, schema_editor) -> None:
    from search.backends import drop_index

    drop_index(schema_editor.connection.alias)


class Migration(migrations.Migration):
    dependencies = [
        ("annotation", "0007_segment_thoughts"),
        ("search", "0001_cohorts"),
    ]

    operations = [migrations.RunPython(create, drop)]
