"""A fidelity run started from the browser or the API only validates and queues: the suite's variants
are made and the items picked by the run's job (runs.engine.plan_run -> fidelity.running.plan_run_items)."""

from __future__ import annotations

import pytest

from annotation.models import Job
from fidelity.models import FidelityRun, Variant
from fidelity.running import run_inline
from runs import engine

pytestmark = pytest.mark.django_db


def test_the_api_queues_and_the_job_makes_the_variants(client, owner, problems, subject):
    study = problems(3)
    client.force_login(owner)
    r = client.post(f"/api/v1/studies/{study.pk}/fidelity-runs/",
                    {"model": "tiny", "axes": "perturbation", "problems": "first:2"}, content_type="application/json")
    assert r.status_code == 202, r.json()
    record = FidelityRun.objects.get()
    # Not transactional: the plan task has not run yet -- the request made no variant.
    assert not Variant.objects.exists() and r.json()["progress"]["total"] == 0
    engine.plan_run(record.run_id)
    job = Job.objects.get(pk=record.job_id)
    report = job.params["suite_report"]
    assert report["variants_created"] == Variant.objects.filter(suite=record.suite).count() > 0
    assert job.total == 2 + report["variants_created"]
    record.run.refresh_from_db()
    assert len(record.run.config["originals"]) == 2
    done = run_inline(record)
    assert done.status == Job.Status.SUCCEEDED


def test_a_filter_naming_no_problem_fails_the_job_with_the_reason(client, owner, problems, subject):
    study = problems(2)
    client.force_login(owner)
    r = client.post(f"/api/v1/studies/{study.pk}/fidelity-runs/", {"model": "tiny", "problems": "pid:nope"},
                    content_type="application/json")
    assert r.status_code == 202
    record = FidelityRun.objects.get()
    engine.plan_run(record.run_id)
    job = Job.objects.get(pk=record.job_id)
    assert job.status == Job.Status.FAILED and "pid: no problem 'nope'" in job.error
