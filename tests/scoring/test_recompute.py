"""Background recomputation: after imports (through annotation's signal),
debounced bursts, profile edits, idempotent re-runs and the score command."""

from __future__ import annotations

import io

import pytest
from django.core.management import CommandError, call_command

from annotation import services as annotation_services
from annotation import signals
from annotation.models import Job, Study
from scoring import score_jobs, services
from scoring.models import ScoreSet, ScoringProfile, TraceScore
from tests.scoring.conftest import records

pytestmark = pytest.mark.django_db


def test_it_recomputes_after_an_import_through_the_signal(study, django_capture_on_commit_callbacks):
    job = annotation_services.do_create_import_job(study, fmt="reasonaudit", skip_invalid=False)
    with django_capture_on_commit_callbacks(execute=True) as callbacks:
        report = annotation_services.run_import_job(job.pk, io.BytesIO(records()))
    assert report.committed
    assert len(callbacks) == 1
    score_job = Job.objects.get(study=study, kind=Job.Kind.SCORE)
    assert score_job.status == Job.Status.SUCCEEDED, score_job.error
    assert score_job.params["reason"] == "import"
    assert set(score_job.result["profiles"]) == {"default", "no-format", "no-hazard", "no-penalties"}
    # final and human under 4 profiles; 3 traces each have complete human labels or no steps
    assert ScoreSet.objects.filter(study=study).count() == 8
    assert TraceScore.objects.filter(score_set__study=study).count() == 8 * 3


def test_a_burst_of_changes_queues_one_job(seeded, django_capture_on_commit_callbacks, monkeypatch):
    from scoring import tasks

    calls = []
    monkeypatch.setattr(tasks.recompute_scores, "delay", lambda job_id: calls.append(job_id))
    with django_capture_on_commit_callbacks(execute=True):
        for i in range(10):
            signals.data_changed.send(sender=Study, study=seeded, reason=f"label save {i}")
    assert Job.objects.filter(study=seeded, kind=Job.Kind.SCORE).count() == 1
    assert len(calls) == 1
    # Once that job runs, the next change queues a new one.
    Job.objects.filter(pk=calls[0]).update(status=Job.Status.RUNNING)
    with django_capture_on_commit_callbacks(execute=True):
        signals.data_changed.send(sender=Study, study=seeded, reason="another save")
    assert Job.objects.filter(study=seeded, kind=Job.Kind.SCORE).count() == 2


def test_a_pending_job_for_one_profile_does_not_swallow_a_full_recompute(seeded, monkeypatch,
                                                                          django_capture_on_commit_callbacks):
    from scoring import tasks

    monkeypatch.setattr(tasks.recompute_scores, "delay", lambda job_id: None)
    with django_capture_on_commit_callbacks(execute=True):
        one = services.request_recompute(seeded, reason="edit", profiles=["no-format"])
        assert services.request_recompute(seeded, reason="edit again", profiles=["no-format"]) == one
        everything = services.request_recompute(seeded, reason="import")
        assert everything != one
        assert services.request_recompute(seeded, reason="edit", profiles=["no-hazard"]) == everything


def test_editing_a_profile_makes_a_new_version_and_rescores_only_it(seeded, owner, django_capture_on_commit_callbacks):
    score_jobs.recompute(seeded, warm=False)
    before = dict(ScoreSet.objects.filter(study=seeded).values_list("pk", "token"))
    with django_capture_on_commit_callbacks(execute=True):
        profile, changed = services.do_edit_profile(seeded, "default", {"tau": 1.0, "w": 0.5}, user=owner)
    assert changed and profile.version == 2 and profile.is_current
    assert ScoringProfile.objects.get(study=seeded, name="default", version=1).is_current is False
    seeded.refresh_from_db()
    assert seeded.default_profile_id == profile.pk
    sets = ScoreSet.objects.filter(study=seeded, profile__name="default")
    assert {s.profile_id for s in sets} == {profile.pk}  # the old version's scores are gone
    assert all(not s.lucky_guess for s in TraceScore.objects.filter(score_set__in=sets, process__gt=1.0))
    others = ScoreSet.objects.filter(study=seeded).exclude(profile__name="default")
    assert {s.pk: s.token for s in others} == {pk: t for pk, t in before.items() if pk in {s.pk for s in others}}
    # Saving the same values again makes no version.
    same, changed = services.do_edit_profile(seeded, "default", {"tau": 1.0}, user=owner)
    assert not changed and same.version == 2


def test_bad_profile_parameters_are_refused_naming_the_field(seeded, owner):
    with pytest.raises(ValueError, match="^w: "):
        services.do_edit_profile(seeded, "default", {"w": 2}, user=owner)
    with pytest.raises(ValueError, match="^gamma: "):
        services.do_create_profile(seeded, "mine", {"gamma": 1}, user=owner)


def test_recomputing_twice_replaces_the_scores(seeded):
    score_jobs.recompute(seeded, warm=False)
    first = list(TraceScore.objects.order_by("score_set__source", "score_set__profile__name", "trace_id")
                 .values_list("trace_id", "process", "holistic"))
    tokens = set(ScoreSet.objects.values_list("token", flat=True))
    score_jobs.recompute(seeded, warm=False)
    again = list(TraceScore.objects.order_by("score_set__source", "score_set__profile__name", "trace_id")
                 .values_list("trace_id", "process", "holistic"))
    assert again == first
    assert tokens.isdisjoint(ScoreSet.objects.values_list("token", flat=True))


def test_a_finished_job_is_not_run_again(seeded):
    job = Job.objects.create(study=seeded, kind=Job.Kind.SCORE, params={"profiles": None})
    assert score_jobs.run_score_job(job.pk)["rows"] > 0
    assert score_jobs.run_score_job(job.pk) is None


def test_a_failing_recompute_marks_the_job_failed(seeded, monkeypatch):
    def boom(*args, **kwargs):
        raise RuntimeError("disk on fire")

    from scoring import storage

    monkeypatch.setattr(storage, "write_chunk", boom)
    job = Job.objects.create(study=seeded, kind=Job.Kind.SCORE, params={"profiles": None})
    with pytest.raises(RuntimeError):
        score_jobs.run_score_job(job.pk)
    job.refresh_from_db()
    assert job.status == Job.Status.FAILED and "disk on fire" in job.error
    assert not ScoreSet.objects.filter(study=seeded).exists()  # no staging set is left behind


def test_the_score_command_recomputes_and_reports(seeded):
    out = io.StringIO()
    call_command("score", study="Study A", stdout=out)
    assert "scored 5 traces" in out.getvalue()
    job = Job.objects.get(study=seeded, kind=Job.Kind.SCORE)
    assert job.status == Job.Status.SUCCEEDED
    assert ScoreSet.objects.filter(study=seeded).count() == 8

    call_command("score", study="Study A", profile="no-hazard", stdout=out)
    assert Job.objects.filter(study=seeded, kind=Job.Kind.SCORE).latest("created_at").result["profiles"] == ["no-hazard"]
    with pytest.raises(CommandError, match="no profile named 'nope'"):
        call_command("score", study="Study A", profile="nope")
    with pytest.raises(CommandError, match="no study"):
        call_command("score", study="nowhere")


def test_a_cancelled_job_stops_between_score_sets(seeded):
    job = Job.objects.create(study=seeded, kind=Job.Kind.SCORE, params={"profiles": None})
    Job.objects.filter(pk=job.pk).update(cancel_requested=True)
    assert score_jobs.run_score_job(job.pk) is None
    job.refresh_from_db()
    assert job.status == Job.Status.CANCELLED
    assert not ScoreSet.objects.filter(study=seeded).exists()


def test_deleting_a_trace_deletes_its_scores(seeded):
    from annotation.models import Trace

    score_jobs.recompute(seeded, warm=False)
    trace = Trace.objects.get(study=seeded, trace_id="t1")
    assert TraceScore.objects.filter(trace=trace).count() == 8
    trace.delete()
    assert not TraceScore.objects.filter(trace_id=trace.pk).exists()
    seeded.delete()
    assert not TraceScore.objects.exists() and not ScoreSet.objects.exists()


def test_a_job_queued_long_ago_is_not_joined(seeded, monkeypatch, django_capture_on_commit_callbacks):
    from datetime import timedelta

    from django.utils import timezone

    from scoring import tasks

    monkeypatch.setattr(tasks.recompute_scores, "delay", lambda job_id: None)
    with django_capture_on_commit_callbacks(execute=True):
        old = services.request_recompute(seeded, reason="lost")
    Job.objects.filter(pk=old.pk).update(created_at=timezone.now() - timedelta(hours=1))
    with django_capture_on_commit_callbacks(execute=True):
        assert services.request_recompute(seeded, reason="labels") != old
