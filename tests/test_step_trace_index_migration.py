"""annotation 0008: annotation_step.trace_id loses its single-column index (the unique (trace, index) serves
it), without touching the table -- the search index's triggers stay -- and gets it back on the way down."""

from __future__ import annotations

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

pytestmark = pytest.mark.django_db(transaction=True)

BEFORE = [("annotation", "0007_segment_thoughts")]
AFTER = [("annotation", "0008_step_trace_no_index")]


def _migrate(targets) -> None:
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(targets)


@pytest.fixture(autouse=True)
def latest_schema_afterwards():
    yield
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(executor.loader.graph.leaf_nodes())


def step_indexes() -> dict[str, tuple[list[str], bool]]:
    """name -> (columns, unique) of the indexes and unique constraints on annotation_step (SQLite reports a
    table's UNIQUE clause as a constraint, not an index)."""
    with connection.cursor() as cursor:
        constraints = connection.introspection.get_constraints(cursor, "annotation_step")
    return {name: (c["columns"], c["unique"]) for name, c in constraints.items()
            if (c["index"] or c["unique"]) and not c["primary_key"]}


def step_triggers() -> set[str]:
    with connection.cursor() as cursor:
        cursor.execute("SELECT name FROM sqlite_master WHERE type = 'trigger' AND tbl_name = 'annotation_step'")
        return {row[0] for row in cursor.fetchall()}


def test_the_trace_index_goes_and_comes_back():
    _migrate(BEFORE)
    assert (["trace_id"], False) in step_indexes().values()
    triggers = step_triggers() if connection.vendor == "sqlite" else set()
    _migrate(AFTER)
    indexes = step_indexes().values()
    assert (["trace_id"], False) not in indexes
    assert (["trace_id", "index"], True) in indexes  # what serves look-ups by trace now
    if connection.vendor == "sqlite":
        assert step_triggers() == triggers and triggers  # the table was not rebuilt
    _migrate(BEFORE)
    assert (["trace_id"], False) in step_indexes().values()
