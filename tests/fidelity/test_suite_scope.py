"""Fidelity variants and their traces belong to their suite (issue 23 item 5): not in the
study's problem list, generation scope, leaderboards, evidence denominators or review queues
unless asked for; one queryset rule (``own()``) serves every place."""

from __future__ import annotations

import pytest
from django.urls import reverse

from annotation.models import Problem, Trace
from annotation.review.progress import study_progress
from annotation.review.queues import next_trace_id
from faithfulness.evidence import compute_summaries
from fidelity.models import Variant
from fidelity.suites import do_create_suite
from scoring import analytics, score_jobs, storage
from scoring.models import ScoreSet
from subjects import services as subject_services
from tests.conftest import jsonl

pytestmark = pytest.mark.django_db


@pytest.fixture
def with_suite(problems, do_import):
    study = problems(3)  # p0..p2 and z-words
    made = do_create_suite(study, "s1", axes=["perturbation"], seed=4)
    assert made.created > 0
    variant_ids = list(Variant.objects.filter(suite=made.suite).values_list("problem__problem_id", flat=True))
    records = [{"kind": "trace", "problem_id": pid, "model": "tiny", "steps": [f"{pid} step"], "answer": "1",
                "labels": [{"step": 1, "verdict": "valid", "annotator": "ann"}]}
               for pid in ["p0", "p1", "p2", *variant_ids]]
    assert do_import(jsonl(*records)).committed
    return study, len(variant_ids)


def test_the_study_keeps_its_own_problems_and_traces(with_suite):
    study, n_variants = with_suite
    assert Problem.objects.filter(study=study).own().count() == 4
    assert Problem.objects.filter(study=study).suite_members().count() == n_variants
    assert Trace.objects.filter(study=study).own().count() == 3
    assert Trace.objects.filter(study=study).suite_members().count() == n_variants


def test_the_problem_list_shows_variants_only_when_asked(client, owner, with_suite):
    study, n_variants = with_suite
    client.force_login(owner)
    url = reverse("problem-list", args=[study.pk])
    variant = Problem.objects.filter(study=study).suite_members().order_by("problem_id").first().problem_id
    rows = client.get(url).content.decode().split('id="problem-rows"')[1]
    assert ">p0<" in rows and variant not in rows
    rows = client.get(url + "?suites=1").content.decode().split('id="problem-rows"')[1]
    assert variant in rows
    study_page = client.get(reverse("study", args=[study.pk])).content.decode()
    assert "imported" not in study_page


def test_the_rest_problem_list_matches_the_web_list(client, owner, with_suite):
    study, n_variants = with_suite
    client.force_login(owner)
    url = f"/api/v1/studies/{study.pk}/problems/"

    def ids(query: str = "") -> set[str]:
        body = client.get(url + query).json()
        return {p["problem_id"] for p in body["results"]} if isinstance(body, dict) else {p["problem_id"] for p in body}

    own = set(Problem.objects.filter(study=study).own().values_list("problem_id", flat=True))
    assert ids() == own and ids("?suites=false") == own
    with_variants = ids("?suites=true")
    assert with_variants > own and len(with_variants) == len(own) + n_variants


def test_generation_scope_leaderboard_evidence_and_queue_leave_variants_out(with_suite, subject, owner):
    study, _ = with_suite
    assert len(subject_services.problems_in_scope(subject, "all", 1)) == 4
    counts = analytics.trace_counts(study)
    assert int(counts["traces"].sum()) == 3
    score_jobs.recompute(study, warm=False)
    score_set = ScoreSet.objects.filter(study=study).first()
    assert len(storage.read_scores(score_set)) == 3
    # The score job reads the study's own traces only: the variants have no scores to include.
    assert len(storage.read_scores(score_set, include_suites=True)) == 3
    assert sum(part["traces"] for part in compute_summaries(study)["exclude"].values()) == 3
    assert study_progress([study.pk], owner)[study.pk]["traces"] == 3
    seen = []
    after = None
    while (nxt := next_trace_id(study, owner, after)) is not None and len(seen) < 50:
        seen.append(nxt)
        after = Trace.objects.get(pk=nxt)
    assert set(seen) == set(Trace.objects.filter(study=study).own().values_list("pk", flat=True))


def test_the_suite_subquery_of_raw_sql_readers_is_neither_ordered_nor_joined(with_suite):
    """annotation.models.suite_problems_sql (the `NOT IN` of the score job's reads and of the stored-score
    reader) selects the suite problems' pks alone: with Problem's default ordering it joined the study and
    sorted its name into every row, too wide for PostgreSQL to hash (27 s per chunk at 1M traces). It selects
    the variants still."""
    from django.db import connection

    from annotation.models import suite_problems_sql

    study, n_variants = with_suite
    sql, params = suite_problems_sql(study.pk)
    assert "ORDER BY" not in sql.upper() and "annotation_study" not in sql
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        pks = {row[0] for row in cursor.fetchall()}
    assert pks == set(Problem.objects.filter(study=study).suite_members().values_list("pk", flat=True))
    assert len(pks) == n_variants
