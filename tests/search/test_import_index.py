"""The SQLite FTS5 index of steps around an import (search.backends.steps_indexed_after): the import adds
its steps to the index by one statement at the end instead of a trigger run per row, and the index ends
exactly as the triggers would have left it -- after a committed import, a rolled-back one, and a failure
caught inside an outer transaction."""

from __future__ import annotations

import pytest
from django.db import connection, transaction

from annotation.models import Step
from search.backends import STEPS, steps_indexed_after
from tests.conftest import jsonl
from tests.search.conftest import seed_search
from tests.search.test_search import QUERIES, ids

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _sqlite():
    if connection.vendor != "sqlite":
        # Nothing to test there: PostgreSQL computes the searched column on insert (CI pass 2).
        pytest.skip("the FTS5 index and its triggers are SQLite's")


def insert_trigger_sql() -> str | None:
    with connection.cursor() as cursor:
        cursor.execute("SELECT sql FROM sqlite_master WHERE type = 'trigger' AND name = %s", [f"{STEPS.fts}_ai"])
        row = cursor.fetchone()
    return row[0] if row else None


def assert_index_matches_steps() -> None:
    """FTS5's own check of an external-content index against its table: every row's terms, no others."""
    with connection.cursor() as cursor:
        cursor.execute(f"INSERT INTO {STEPS.fts}({STEPS.fts}, rank) VALUES ('integrity-check', 1)")


def indexed(word: str) -> set[int]:
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT rowid FROM {STEPS.fts} WHERE {STEPS.fts} MATCH %s", [word])
        return {row[0] for row in cursor.fetchall()}


def test_an_import_indexes_its_steps_and_keeps_the_trigger(study, owner_m, do_import):
    before = insert_trigger_sql()
    assert before is not None
    seed_search(study, do_import)
    assert insert_trigger_sql() == before
    assert_index_matches_steps()
    assert {q: ids(study, owner_m, q=q) for q in QUERIES} == QUERIES
    # The trigger is back: a step written outside an import is indexed on insert.
    trace = Step.objects.first().trace
    step = Step.objects.create(trace=trace, index=99, text="zygomorphic petals")
    assert indexed("zygomorphic") == {step.pk}
    assert_index_matches_steps()


def test_a_second_import_indexes_only_its_new_steps(study, owner_m, do_import):
    seed_search(study, do_import)
    report = do_import(jsonl(
        {"kind": "problem", "problem_id": "pears", "statement": "Bo has 4 pears.", "gold_answer": "4"},
        {"kind": "trace", "problem_id": "pears", "model": "m1", "trace_id": "p1",
         "raw": "<think>\nPears first.\n\nWait, quinces too?\n</think>\n\nThe answer is 4."},
    ))
    assert report.committed, report.rejected
    assert_index_matches_steps()  # an old step indexed twice would fail the check too
    assert ids(study, owner_m, q="quinces") == ["p1"]
    assert sorted(ids(study, owner_m, q="wait")) == ["p1", "t1", "t3"]


def test_a_rejected_import_leaves_the_index_and_trigger_as_they_were(study, owner_m, do_import):
    seed_search(study, do_import)
    before = insert_trigger_sql()
    report = do_import(jsonl(
        {"kind": "problem", "problem_id": "plums", "statement": "Cy has 2 plums.", "gold_answer": "2"},
        {"kind": "trace", "problem_id": "plums", "model": "m1", "trace_id": "q1", "steps": ["Damsons here."]},
        {"kind": "trace", "problem_id": "nowhere", "model": "m1", "trace_id": "q2", "steps": ["x"]},
    ))
    assert not report.committed
    assert insert_trigger_sql() == before
    assert indexed("damsons") == set()
    assert_index_matches_steps()


def test_a_failure_caught_inside_an_outer_transaction_restores_the_trigger(study, do_import):
    seed_search(study, do_import)
    before = insert_trigger_sql()
    trace = Step.objects.first().trace
    with transaction.atomic():
        with pytest.raises(RuntimeError):
            with steps_indexed_after():
                assert insert_trigger_sql() is None  # deferred inside
                Step.objects.create(trace=trace, index=98, text="lost kumquat")
                raise RuntimeError("the import failed")
        # The outer transaction goes on, with the trigger and without the failed block's step.
        assert insert_trigger_sql() == before
        Step.objects.create(trace=trace, index=97, text="kept loquat")
    assert indexed("kumquat") == set()
    assert len(indexed("loquat")) == 1
    assert_index_matches_steps()
