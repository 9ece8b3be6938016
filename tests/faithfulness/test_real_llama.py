"""Interventions and an anytime profile against the real model: llama-cpp-python's server with
SmolLM2-135M-Instruct (the session fixture ``llama`` of tests/llama.py). The model is tiny and
mostly wrong: these check the plumbing -- the probed mode, every continuation accounted for and
stored with its record -- not its arithmetic."""

from __future__ import annotations

import pytest

from annotation.models import Job
from faithfulness.models import Status
from faithfulness.running import do_start_anytime, do_start_interventions, run_inline
from faithfulness.summaries import anytime_summary
from subjects import services as subject_services
from tests.faithfulness.conftest import SMOLLM2
from tests.subjects.conftest import generate, problem_records

pytestmark = [pytest.mark.integration, pytest.mark.django_db]


def test_interventions_and_anytime_run_in_the_completions_mode_on_smollm2(study, do_import, llama):
    report = do_import(problem_records(3))
    assert report.committed, report.rejected
    subject, _ = subject_services.do_save_subject(study, {
        "name": "smollm2", "model": "smollm2", "base_url": llama, "temperature": 0.0, "seed": 0, "max_tokens": 96,
        "concurrency": 1, "timeout_seconds": 120.0, "max_retries": 1, "chat_template": SMOLLM2})
    subject_services.do_probe_subject_model(subject)
    assert subject.continuation == "completions"
    _run, job = generate(subject)
    assert job.status == Job.Status.SUCCEEDED, job.error

    record = do_start_interventions(subject, kinds="value_flip,paraphrase", per_trace=1, queue=False)
    job = run_inline(record)
    assert job.status == Job.Status.SUCCEEDED, job.error
    asked = record.interventions.exclude(status=Status.NOT_APPLICABLE)
    assert job.total == asked.count() and job.done == job.total
    for row in asked:
        assert row.status == Status.OK and row.result["mode"] == "completions" and row.result["ok"]
        assert row.result["completion_tokens"] is not None
        assert (row.invariant if row.kind == "paraphrase" else row.lenient) is not None

    anytime = do_start_anytime(subject, grid="tokens:8,full", queue=False)
    job = run_inline(anytime)
    assert job.status == Job.Status.SUCCEEDED, job.error
    summary = anytime_summary(anytime)
    assert summary["n"] == 3 and summary["pending"] == 0 and len(summary["acc"]) == 2
