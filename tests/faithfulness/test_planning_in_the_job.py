"""Starting an interventions or anytime run only validates and queues: the traces are read and the
interventions or truncations written by the run's job (runs.engine.plan_run), not by the request;
the anytime grid has a maximum (docs/runs.md)."""

from __future__ import annotations

import pytest

from annotation.models import Job
from faithfulness.core import anytime
from faithfulness.models import AnytimePoint, Intervention
from faithfulness.running import do_start_anytime, do_start_interventions, run_inline
from runs import engine
from runs.params import ParamError

pytestmark = pytest.mark.django_db


def test_the_request_queues_and_the_job_plans(generated):
    # Not transactional: the commit hook that queues the plan task never runs, as if no worker had it yet.
    record = do_start_interventions(generated, kinds="value_flip,paraphrase")
    assert record.job.status == Job.Status.QUEUED and record.job.total == 0
    assert not Intervention.objects.exists() and not record.run.chunks.exists()
    engine.plan_run(record.run_id)  # the plan task's work
    record.refresh_from_db()
    assert record.traces == 4 and Intervention.objects.filter(frun=record).count() == 8
    assert record.job.__class__.objects.get(pk=record.job_id).total == 8 and record.run.chunks.exists()
    engine.plan_run(record.run_id)  # a re-delivered plan task plans nothing twice
    assert Intervention.objects.filter(frun=record).count() == 8
    job = run_inline(record)
    assert job.status == Job.Status.SUCCEEDED and job.done == 8


def test_an_anytime_plan_happens_in_the_job_too(generated):
    record = do_start_anytime(generated, grid="tokens:4,8,full")
    assert not AnytimePoint.objects.exists()
    engine.plan_run(record.run_id)
    assert AnytimePoint.objects.filter(frun=record).count() == 12


def test_a_plan_that_fails_ends_the_job_with_its_reason(generated):
    record = do_start_anytime(generated, grid="tokens:4,full")
    generated.study.traces.all().delete()  # nothing left to plan when the job comes
    engine.plan_run(record.run_id)
    record.job.refresh_from_db()
    assert record.job.status == Job.Status.FAILED and "planning failed" in record.job.error and "run generate" in record.job.error


def test_an_anytime_grid_and_the_trace_limit_have_maxima(generated):
    huge = "tokens:" + ",".join(str(b) for b in range(1, 300_001))
    with pytest.raises(anytime.GridError, match="at most 64"):
        do_start_anytime(generated, grid=huge)
    with pytest.raises(anytime.GridError, match="exceeds the largest tokens budget"):
        do_start_anytime(generated, grid="tokens:10,1000000")
    with pytest.raises(ParamError, match=r"limit: must lie in 1\.\.100000"):
        do_start_anytime(generated, grid="tokens:4,full", limit=10**9)
    assert not Job.objects.filter(kind="faithfulness").exists()


def test_a_cohort_scopes_the_planned_traces(generated, owner):
    """A saved cohort (issue 22) as the scope: only its traces are planned; one without the subject's
    traces is refused at once, by the ``cohort`` field."""
    from annotation.models import Membership, Trace
    from search.services import do_save_cohort

    study = generated.study
    membership = Membership.objects.get(study=study, user=owner)
    first_two = list(Trace.objects.filter(study=study).order_by("pk").values_list("trace_id", flat=True)[:2])
    cohort = do_save_cohort(study, membership, name="two", data={})
    # keep only two traces in the snapshot: the scope is the snapshot, not the query
    cohort.members.exclude(trace__trace_id__in=first_two).delete()
    record = do_start_interventions(generated, kinds="value_flip,paraphrase", cohort=str(cohort.pk))
    engine.plan_run(record.run_id)
    record.refresh_from_db()
    assert record.traces == 2 and Intervention.objects.filter(frun=record).count() == 4
    assert set(Intervention.objects.filter(frun=record).values_list("trace__trace_id", flat=True)) == set(first_two)
    cohort.members.all().delete()
    with pytest.raises(ParamError, match=f"cohort: cohort {cohort.pk} holds none of subject model tiny"):
        do_start_anytime(generated, grid="tokens:4,full", cohort=str(cohort.pk))
