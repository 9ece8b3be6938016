"""The built-in mechanistic judge end to end on the bundled GSM8K solutions,
and the run machinery that keeps at-least-once delivery safe: chunk claims,
leases, take-over of a dead worker's chunk, the disagreement feed."""

from __future__ import annotations

import io
import re
from datetime import timedelta
from fractions import Fraction
from pathlib import Path

import pytest
from django.utils import timezone

from annotation import services as study_services
from annotation.importing.pipeline import import_stream
from annotation.models import Job, LabelHistory, Step, StepLabel, Study, Trace
from annotation.signals import data_changed
from judges import services
from judges.models import MECHANISTIC, JudgeConfig, JudgeRun, JudgeTraceResult
from runs import engine
from runs.engine import RunConflict
from runs.models import RunChunk
from tests.conftest import jsonl
from tests.judges.conftest import run_judge

pytestmark = pytest.mark.django_db

GSM8K = Path(__file__).resolve().parents[2] / "annotation" / "demo_data" / "gsm8k" / "example_model_solutions.jsonl"
ANNOTATION = re.compile(r"<<([^<>=]+)=([^<>]+)>>")
SIMPLE = re.compile(r"^[\d.+\-*/() ]+$")


def false_annotations(text: str) -> list[str]:
    """Calculator annotations whose stated result is plainly not the value of
    the expression, by an independent check (exact fractions, integer results)."""
    out = []
    for expr, stated in ANNOTATION.findall(text):
        if not SIMPLE.match(expr) or not re.fullmatch(r"-?\d+", stated.strip()) or "**" in expr:
            continue
        expr_f = re.sub(r"(\d+(?:\.\d+)?)", r"Fraction('\1')", expr)
        try:
            value = eval(expr_f, {"Fraction": Fraction, "__builtins__": {}})  # digits, operators and Fraction only
        except (ZeroDivisionError, SyntaxError):
            continue
        if value != int(stated):
            out.append(f"{expr}={stated}")
    return out


@pytest.fixture
def gsm8k(study):
    lines = GSM8K.read_bytes().splitlines(keepends=True)[:200]
    report = import_stream(study, io.BytesIO(b"".join(lines)), "gsm8k-solutions")
    assert report.committed and report.traces_created == 800
    return study


def test_the_mechanistic_judge_labels_the_gsm8k_false_annotations_invalid(gsm8k):
    judge = JudgeConfig.objects.get(study=gsm8k, name=MECHANISTIC)
    run, job = run_judge(judge)
    assert job.status == Job.Status.SUCCEEDED and (job.done, job.total, job.failed) == (800, 800, 0)
    n_steps = Step.objects.filter(trace__study=gsm8k).count()
    labels = StepLabel.objects.filter(kind=StepLabel.Kind.JUDGE, judge=judge)
    assert labels.count() == n_steps == run.labels_created
    wrong = [(text, verdict) for text, verdict in labels.values_list("step__text", "verdict") if false_annotations(text)]
    assert len(wrong) >= 5
    assert all(verdict == "invalid" for _, verdict in wrong), [t for t, v in wrong if v != "invalid"][:5]
    example = labels.filter(verdict="invalid").exclude(reason="").first()
    assert example.confidence == 1.0 and "is false" in example.reason
    # true claims that derive a skeleton check's value refer to that skeleton step
    assert labels.filter(verdict="valid").exclude(skeleton_refs=[]).count() > 100
    assert LabelHistory.objects.filter(via="judge run", source_name=MECHANISTIC).count() == n_steps
    # a second run changes nothing and records nothing
    run2, job2 = run_judge(judge)
    assert (run2.labels_created, run2.labels_changed, run2.labels_unchanged) == (0, 0, n_steps)
    assert LabelHistory.objects.filter(via="judge run").count() == n_steps


def test_every_new_study_has_the_mechanistic_judge_as_its_primary_judge(owner):
    study, _ = study_services.do_get_or_create_study("Fresh", owner=owner)
    judge = JudgeConfig.objects.get(study=study, name=MECHANISTIC)
    assert judge.provider == "mechanistic" and judge.builtin
    study.refresh_from_db()
    assert study.primary_judge == judge


def test_the_data_migration_adds_the_judge_to_existing_studies(study):
    from importlib import import_module

    from django.apps import apps

    JudgeConfig.objects.filter(study=study).delete()
    Study.objects.filter(pk=study.pk).update(primary_judge=None)
    import_module("judges.migrations.0003_mechanistic_judge_for_every_study").forwards(apps, None)
    study.refresh_from_db()
    assert study.primary_judge.name == MECHANISTIC


def test_the_demo_command_judges_in_process(study, do_import, settings, tmp_path, monkeypatch):
    from django.core.management import call_command

    from demo.management.commands import demo

    small = tmp_path / "demo.jsonl"
    small.write_bytes(b"".join(GSM8K.read_bytes().splitlines(keepends=True)[:5]))
    monkeypatch.setattr(demo, "DEMO_FILE", small)
    monkeypatch.setattr(demo, "DEMO_LABELS", [])  # their traces are not among the first five problems
    call_command("demo", password="pw-demo-123", stdout=io.StringIO())
    demo_study = Study.objects.get(name=demo.DEMO_STUDY)
    labels = StepLabel.objects.filter(judge__name=MECHANISTIC, step__trace__study=demo_study)
    # The study's own traces: the stand-in's fidelity variants and the abstraction items belong to their pages.
    assert labels.count() == sum(Trace.objects.of_study(demo_study).values_list("n_steps", flat=True)) > 0
    assert not labels.filter(step__trace__in=Trace.objects.filter(study=demo_study).suite_members()).exists()
    assert Job.objects.get(study=demo_study, kind=Job.Kind.JUDGE).status == Job.Status.SUCCEEDED


def _started_run(study, judge=None) -> JudgeRun:
    judge = judge or JudgeConfig.objects.get(study=study, name=MECHANISTIC)
    return services.do_start_run(judge, queue=False)


def test_a_chunk_is_done_once_however_often_its_task_arrives(study, make_traces):
    make_traces(4)
    run = _started_run(study)
    chunk = run.chunks.get()
    assert engine.process_chunk(chunk.pk, "w1/a") is None  # the last chunk: the run ends
    assert engine.process_chunk(chunk.pk, "w2/b") is None  # re-delivered: nothing to do
    assert StepLabel.objects.filter(kind="judge").count() == 12
    assert JudgeTraceResult.objects.count() == 4 and LabelHistory.objects.count() == 12
    job = Job.objects.get(pk=run.job_id)
    assert (job.status, job.done) == (Job.Status.SUCCEEDED, 4)


def test_a_chunk_held_by_a_live_worker_is_left_alone_until_its_lease_expires(study, make_traces):
    make_traces(2)
    run = _started_run(study)
    chunk = run.chunks.get()
    assert engine.claim_chunk(chunk.pk, "w1/a")
    assert engine.process_chunk(chunk.pk, "w2/b") is None
    assert not StepLabel.objects.filter(kind="judge").exists()
    RunChunk.objects.filter(pk=chunk.pk).update(lease_until=timezone.now() - timedelta(seconds=1))
    engine.process_chunk(chunk.pk, "w2/b")
    assert StepLabel.objects.filter(kind="judge").count() == 6
    chunk.refresh_from_db()
    assert (chunk.status, chunk.holder, chunk.attempts) == ("done", "w2/b", 2)


def test_the_old_holder_cannot_commit_a_chunk_taken_over(study, make_traces):
    make_traces(2)
    run = _started_run(study)
    chunk = run.chunks.get()
    engine.claim_chunk(chunk.pk, "w1/a")
    RunChunk.objects.filter(pk=chunk.pk).update(holder="w2/b")
    assert not engine._release(chunk, "w1/a", RunChunk.Status.DONE)


def test_a_restarted_worker_resumes_the_chunks_of_its_dead_predecessor(study, make_traces, monkeypatch):
    make_traces(3)
    run = _started_run(study)
    chunk = run.chunks.get()
    engine.claim_chunk(chunk.pk, "celery@box/old-boot")  # then the worker was killed
    queued = []
    monkeypatch.setattr(engine, "queue_chunk", queued.append)
    assert engine.resume_stalled("other@box", "x") == []  # another node's live-looking chunk: left alone
    assert engine.resume_stalled("celery@box", "new-boot") == [chunk.pk]
    chunk.refresh_from_db()
    assert chunk.status == "pending" and chunk.holder == ""
    engine.process_chunk(chunk.pk, "celery@box/new-boot")
    assert Job.objects.get(pk=run.job_id).status == Job.Status.SUCCEEDED
    assert StepLabel.objects.filter(kind="judge").count() == 9


def test_a_run_whose_next_chunk_was_never_queued_is_picked_up(study, make_traces, monkeypatch):
    make_traces(2)
    run = _started_run(study)
    queued = []
    monkeypatch.setattr(engine, "queue_chunk", queued.append)
    assert engine.resume_stalled() == [run.chunks.get().pk]


def test_a_chunk_failing_again_and_again_fails_the_run(study, make_traces):
    make_traces(2)
    run = _started_run(study)
    chunk = run.chunks.get()
    for attempt in range(engine.MAX_CHUNK_ATTEMPTS):
        assert engine.claim_chunk(chunk.pk, "w/a")
        again = engine.release_failed_chunk(chunk.pk, "w/a", "OperationalError: database is locked")
        assert (again is None) == (attempt == engine.MAX_CHUNK_ATTEMPTS - 1)
    job = Job.objects.get(pk=run.job_id)
    assert job.status == Job.Status.FAILED and "database is locked" in job.error


def test_one_run_at_a_time_per_judge(study, make_traces):
    make_traces(2)
    _started_run(study)
    with pytest.raises(RunConflict, match="in progress"):
        _started_run(study)


def test_a_run_over_nothing_succeeds_at_once(study):
    run = _started_run(study)
    assert run.job.status == Job.Status.SUCCEEDED and run.job.total == 0


def test_runs_over_unlabelled_failed_and_filtered_traces(study, make_traces, llm_judge):
    make_traces(6)
    judge = JudgeConfig.objects.get(study=study, name=MECHANISTIC)
    run_judge(judge, filters={"model": "m1"})
    assert JudgeTraceResult.objects.filter(judge=judge).count() == 3
    assert services.traces_in_scope(judge, "unlabelled").count() == 3
    _, job = run_judge(judge, scope="unlabelled")
    assert job.total == 3 and services.traces_in_scope(judge, "unlabelled").count() == 0
    assert services.traces_in_scope(judge, "failed").count() == 0
    assert services.traces_in_scope(judge, "all", {"trace_ids": ["t0001", "t0004"]}).count() == 2
    with pytest.raises(ValueError, match="unknown filter"):
        services.traces_in_scope(judge, "all", {"colour": "red"})


def test_the_disagreement_feed_counts_steps_where_judge_and_annotators_differ(study, do_import):
    labels = [{"step": 1, "verdict": "valid", "annotator": "ann"}, {"step": 2, "verdict": "valid", "annotator": "ann"},
              {"step": 1, "verdict": "valid", "annotator": "bob"}]
    do_import(jsonl({"kind": "problem", "problem_id": "p", "statement": "s", "gold_answer": "7"},
                    {"kind": "trace", "problem_id": "p", "model": "m", "trace_id": "t", "steps": ["3 + 4 = 7", "3 * 4 = 13"],
                     "answer": "7", "labels": labels}))
    judge = JudgeConfig.objects.get(study=study, name=MECHANISTIC)
    run_judge(judge)
    feed = services.disagreements(study, judge)
    assert [(s.index, s.judge_verdict) for s in feed] == [(2, "invalid")]
    assert services.disagreement_counts(study) == {judge.pk: 1}


def test_scores_are_recomputed_after_a_run_that_changed_labels(study, make_traces,
                                                               django_capture_on_commit_callbacks):
    make_traces(2)
    judge = JudgeConfig.objects.get(study=study, name=MECHANISTIC)
    reasons = []

    def receiver(sender, study, reason, **kwargs):
        reasons.append(reason)

    data_changed.connect(receiver, dispatch_uid="test-judge-reasons")
    try:
        with django_capture_on_commit_callbacks(execute=True):
            run_judge(judge)
        assert reasons.count("judge") == 1
        with django_capture_on_commit_callbacks(execute=True):
            run_judge(judge)  # nothing changed: nothing to recompute
        assert reasons.count("judge") == 1
    finally:
        data_changed.disconnect(dispatch_uid="test-judge-reasons")


def test_the_mechanistic_judge_checks_thought_steps(study):
    from annotation.models import Problem
    from tests.scoring.thought_fixtures import thinking_trace

    problem = Problem.objects.create(study=study, problem_id="eggs2", statement="Eggs?", gold_answer="18")
    thinking_trace(study, problem, "think1", "r1", ["Janet has 16 eggs.", "She keeps 16 - 3 - 4 = 8.",
                                                   "Wait, 16 - 3 - 4 = 9."], ["9 * 2 = 18"], True)
    judge = JudgeConfig.objects.get(study=study, name=MECHANISTIC)
    _run, job = run_judge(judge)
    assert job.status == Job.Status.SUCCEEDED
    got = dict(StepLabel.objects.filter(judge=judge, step__trace__trace_id="think1")
               .values_list("step__index", "verdict"))
    # R1-style arithmetic inside the thought is checked like any step
    assert got == {1: "neutral", 2: "invalid", 3: "valid", 4: "valid"}
