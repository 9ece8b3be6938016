"""The SQLite FTS5 index of steps and problems around an import (search.backends.indexed_after): the import
adds its steps and its problems' statements to the index by one statement each at the end instead of a
trigger run per row, and the indexes end exactly as the triggers would have left them -- after a committed
import, a rolled-back one, and a failure caught inside an outer transaction."""

from __future__ import annotations

import pytest
from django.db import connection, transaction

from annotation.models import Problem, Step
from search.backends import IMPORTED, PROBLEMS, STEPS, Source, indexed_after
from tests.conftest import jsonl
from tests.search.conftest import seed_search
from tests.search.test_search import QUERIES, ids

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _sqlite():
    if connection.vendor != "sqlite":
        # Nothing to test there: PostgreSQL computes the searched column on insert (CI pass 2).
        pytest.skip("the FTS5 index and its triggers are SQLite's")


def insert_trigger_sql(src: Source = STEPS) -> str | None:
    with connection.cursor() as cursor:
        cursor.execute("SELECT sql FROM sqlite_master WHERE type = 'trigger' AND name = %s", [f"{src.fts}_ai"])
        row = cursor.fetchone()
    return row[0] if row else None


def triggers() -> dict[str, str | None]:
    return {src.fts: insert_trigger_sql(src) for src in IMPORTED}


def assert_index_matches_steps() -> None:
    """FTS5's own check of an external-content index against its table: every row's terms, no others (the
    steps' index and the problems')."""
    with connection.cursor() as cursor:
        for src in IMPORTED:
            cursor.execute(f"INSERT INTO {src.fts}({src.fts}, rank) VALUES ('integrity-check', 1)")


def indexed(word: str, src: Source = STEPS) -> set[int]:
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT rowid FROM {src.fts} WHERE {src.fts} MATCH %s", [word])
        return {row[0] for row in cursor.fetchall()}


def test_an_import_indexes_its_steps_and_problems_and_keeps_the_triggers(study, owner_m, do_import):
    before = triggers()
    assert None not in before.values()
    seed_search(study, do_import)
    assert triggers() == before
    assert_index_matches_steps()
    assert {q: ids(study, owner_m, q=q) for q in QUERIES} == QUERIES
    assert indexed("litres", PROBLEMS) == {Problem.objects.get(problem_id="juice").pk}
    # The triggers are back: a step or a problem written outside an import is indexed on insert.
    trace = Step.objects.first().trace
    step = Step.objects.create(trace=trace, index=99, text="zygomorphic petals")
    assert indexed("zygomorphic") == {step.pk}
    problem = Problem.objects.create(study=study, problem_id="petals", statement="Count the actinomorphic petals.")
    assert indexed("actinomorphic", PROBLEMS) == {problem.pk}
    assert_index_matches_steps()


def test_a_second_import_indexes_only_its_new_steps(study, owner_m, do_import):
    seed_search(study, do_import)
    report = do_import(jsonl(
        {"kind": "problem", "problem_id": "pears", "statement": "Bo has 4 pears.", "gold_answer": "4"},
        {"kind": "trace", "problem_id": "pears", "model": "m1", "trace_id": "p1",
         "raw": "<think>\nPears first.\n\nWait, quinces too?\n</think>\n\nThe answer is 4."},
    ))
    assert report.committed, report.rejected
    assert_index_matches_steps()  # an old step or problem indexed twice would fail the check too
    assert ids(study, owner_m, q="quinces") == ["p1"]
    assert ids(study, owner_m, q="pears") == ["p1"]  # by its problem's statement
    assert sorted(ids(study, owner_m, q="wait")) == ["p1", "t1", "t3"]


def test_a_rejected_import_leaves_the_indexes_and_triggers_as_they_were(study, owner_m, do_import):
    seed_search(study, do_import)
    before = triggers()
    report = do_import(jsonl(
        {"kind": "problem", "problem_id": "plums", "statement": "Cy has 2 plums.", "gold_answer": "2"},
        {"kind": "trace", "problem_id": "plums", "model": "m1", "trace_id": "q1", "steps": ["Damsons here."]},
        {"kind": "trace", "problem_id": "nowhere", "model": "m1", "trace_id": "q2", "steps": ["x"]},
    ))
    assert not report.committed
    assert triggers() == before
    assert indexed("damsons") == set()
    assert indexed("plums", PROBLEMS) == set()
    assert_index_matches_steps()


def test_a_failure_caught_inside_an_outer_transaction_restores_the_triggers(study, do_import):
    seed_search(study, do_import)
    before = triggers()
    trace = Step.objects.first().trace
    with transaction.atomic():
        with pytest.raises(RuntimeError):
            with indexed_after():
                assert set(triggers().values()) == {None}  # deferred inside
                Step.objects.create(trace=trace, index=98, text="lost kumquat")
                Problem.objects.create(study=study, problem_id="lost", statement="A lost medlar.")
                raise RuntimeError("the import failed")
        # The outer transaction goes on, with the triggers and without the failed block's rows.
        assert triggers() == before
        Step.objects.create(trace=trace, index=97, text="kept loquat")
        Problem.objects.create(study=study, problem_id="kept", statement="A kept persimmon.")
    assert indexed("kumquat") == set()
    assert indexed("medlar", PROBLEMS) == set()
    assert len(indexed("loquat")) == 1
    assert len(indexed("persimmon", PROBLEMS)) == 1
    assert_index_matches_steps()
