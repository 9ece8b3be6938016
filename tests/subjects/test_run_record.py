"""The run record (runs.models.RunRecord) as a kind inherits it, shown on the generation kind: the
engine's figures read through, the summary with the kind's counters, the failures kept under a lock
and read back as the run's reasons, and the reverse accessors the pages use."""

from __future__ import annotations

import pytest
from django.db import transaction

from runs.clients import client_for
from runs.models import MAX_FAILURES_KEPT
from subjects.runclient import KIND
from tests.subjects.conftest import generate

pytestmark = pytest.mark.django_db


def test_the_record_reads_the_engines_figures_and_sums_up_with_its_counters(make_problems, subject):
    make_problems(2)
    record, job = generate(subject(), samples=2)
    assert (record.requests, record.cost_usd, record.notes) == (record.run.requests, record.run.cost_usd, record.run.notes)
    assert record.requests == 4 and list(record.chunks.all()) == list(record.run.chunks.all())
    summary = record.summary()
    assert summary["run"] == record.pk and summary["requests"] == 4 and summary["traces_created"] == 4
    assert summary["subject_model"] == "tiny" and job.result == summary
    assert record.job.generation_run == record and record.run.generation_run == record


def test_failures_keep_the_first_ones_and_are_the_runs_reasons(make_problems, subject):
    make_problems(1)
    record, _job = generate(subject())
    with transaction.atomic():
        record.add_failures({"p1": "HTTP 500: boom"})
        record.add_failures({"p1": "HTTP 500: again", "p2": "x" * 2000})
        record.add_failures({f"q{i}": "later" for i in range(MAX_FAILURES_KEPT)})
    record.refresh_from_db()
    assert record.failures["p1"] == "HTTP 500: again" and len(record.failures["p2"]) == 1000
    assert len(record.failures) == MAX_FAILURES_KEPT
    assert client_for(KIND).failure_reasons(record.run, 2) == ["p1: HTTP 500: again", f"p2: {'x' * 1000}"]
