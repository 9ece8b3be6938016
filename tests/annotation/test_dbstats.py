"""The planner's statistics of tables a bulk write changed are refreshed by the reads that follow it
(annotation.dbstats): a table is analyzed once its changes pass autovacuum's threshold, and not again until they
do; the score job refreshes what it reads when it plans, and its scores when it publishes them."""

from __future__ import annotations

import pytest
from django.db import connection

from annotation import dbstats
from annotation.models import Problem, Step, StepLabel, Trace
from judges import services as judge_services
from scoring import score_jobs
from scoring.models import TraceScore
from tests.conftest import jsonl
from tests.judges.conftest import run_judge


def _flushed() -> None:
    """This session's table counters, as pg_stat_user_tables shows them to the next statement (PostgreSQL 15
    flushes a backend's counters at most once a second otherwise)."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_stat_force_next_flush()")
        cursor.execute("SELECT pg_stat_clear_snapshot()")


def _analyzed(table: str) -> bool:
    with connection.cursor() as cursor:
        cursor.execute("SELECT last_analyze IS NOT NULL FROM pg_stat_user_tables WHERE relname = %s "
                       "AND schemaname = current_schema()", [table])
        return cursor.fetchone()[0]


def _study_of(n_traces: int, steps: int = 4) -> bytes:
    records: list[dict] = [{"kind": "problem", "problem_id": "p", "statement": "2 + 2?", "gold_answer": "4"}]
    records += [{"kind": "trace", "problem_id": "p", "trace_id": f"t{i}", "model": "m",
                 "steps": [f"Step {k}: 2 + 2 = 4." for k in range(steps)], "answer": "4"} for i in range(n_traces)]
    return jsonl(*records)


@pytest.mark.django_db
def test_nothing_on_sqlite():
    if connection.vendor == "postgresql":
        pytest.skip("SQLite's case")
    assert dbstats.refresh_stale([Step, Trace]) == []


@pytest.mark.django_db(transaction=True)
def test_stale_tables_are_analyzed_once(do_import):
    if connection.vendor != "postgresql":
        pytest.skip("PostgreSQL's statistics")
    do_import(_study_of(30))  # 120 steps: past 50 + 10% of them
    _flushed()
    assert dbstats.refresh_stale([Step, Trace, StepLabel]) == ["annotation_step"]  # 30 traces: under 50 + 3
    assert _analyzed("annotation_step") and not _analyzed("annotation_trace")
    _flushed()
    assert dbstats.refresh_stale([Step]) == []  # nothing changed since


@pytest.mark.django_db(transaction=True)
def test_the_score_job_refreshes_what_it_reads_and_writes(study, do_import):
    if connection.vendor != "postgresql":
        pytest.skip("PostgreSQL's statistics")
    do_import(_study_of(60))
    run_judge(judge_services.ensure_mechanistic(study))
    _flushed()
    score_jobs.recompute(study, warm=False)
    for model in (Step, Trace, StepLabel):
        assert _analyzed(model._meta.db_table), model
    assert not _analyzed(Problem._meta.db_table)  # one problem: under the threshold
    assert TraceScore.objects.exists() and _analyzed(TraceScore._meta.db_table)
