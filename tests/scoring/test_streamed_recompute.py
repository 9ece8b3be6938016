"""The streamed recompute (chunks of traces read twice: hazard counts, then scores) stores exactly what
scoring the whole study in memory gives: every per-trace value, every hazard table, every recovery list,
bit for bit, on a study cut into many chunks."""

from __future__ import annotations

import json
import random

import pytest

from annotation.models import Problem, Step, StepLabel, Trace, TraceReview
from judges.models import JudgeConfig
from scoring import score_jobs, services, sources, storage
from scoring.core.aggregate import to_records
from scoring.core.hazard import pinned_hazard_table
from scoring.core.labels import complete_traces
from scoring.core.scores import estimate_hazard, score_traces
from scoring.core.thought import channel_traces
from scoring.models import ScoreSet, TraceScore

pytestmark = pytest.mark.django_db

VERDICTS = ["valid", "valid", "valid", "invalid", "neutral"]


def random_study(study, annotators, seed: int = 7, n_traces: int = 60) -> None:
    """Traces of 0 to 8 steps (some thinking first, with calculations that go wrong and are re-derived),
    problems with and without a skeleton, two annotators (complete and partial reviews, disagreements),
    two judges (one labels only some traces, some of them partly), adjudications and a primary judge."""
    rng = random.Random(seed)
    problems = [Problem.objects.create(study=study, problem_id=f"p{i}", statement=f"q{i}", gold_answer="18",
                                       domain=["arith", "alg"][i % 2], l_gold=[0, 2, 3][i % 3]) for i in range(6)]
    judges = [JudgeConfig.objects.create(study=study, name=name, provider="fake") for name in ("alpha", "beta")]
    labels: list[StepLabel] = []
    reviews: list[TraceReview] = []
    for i in range(n_traces):
        n_thought = rng.choice([0, 0, 2, 4])
        n_answer = rng.choice([0, 1, 2, 3, 4])
        thought = [rng.choice(["16 - 3 = 12", "16 - 3 = 13", "hmm", "13 - 4 = 9", "so 9"]) for _ in range(n_thought)]
        answer = [rng.choice(["9 * 2 = 18", "A: 18", "16 - 3 = 13"]) for _ in range(n_answer)]
        trace = Trace.objects.create(
            study=study, problem=problems[i % len(problems)], model=f"m{i % 3}", trace_id=f"t{i}",
            thought="\n\n".join(thought), raw="\n".join(answer), answer="18", answer_correct=rng.random() < 0.6,
            n_steps=n_thought + n_answer, n_thought_steps=n_thought, steps_hash=f"h{i}")
        steps = Step.objects.bulk_create(
            [Step(trace=trace, index=k, text=t, channel=Step.Channel.THOUGHT) for k, t in enumerate(thought, 1)]
            + [Step(trace=trace, index=n_thought + k, text=t, channel=Step.Channel.ANSWER)
               for k, t in enumerate(answer, 1)])
        for judge, share, partly in ((judges[0], 1.0, 0.0), (judges[1], 0.5, 0.3)):
            if rng.random() < share:
                cut = len(steps) - 1 if steps and rng.random() < partly else len(steps)
                labels += [StepLabel(step=s, kind=StepLabel.Kind.JUDGE, judge=judge, verdict=rng.choice(VERDICTS))
                           for s in steps[:cut]]
        for user in annotators:
            if rng.random() < 0.5:
                complete = rng.random() < 0.8
                cut = len(steps) if complete else max(0, len(steps) - 1)
                labels += [StepLabel(step=s, kind=StepLabel.Kind.HUMAN, annotator=user,
                                     verdict=rng.choice(VERDICTS), skeleton_refs=rng.choice([[], [1], [1, 2], [3]]))
                           for s in steps[:cut]]
                reviews.append(TraceReview(trace=trace, annotator=user, complete=complete))
        if steps and rng.random() < 0.15:
            labels.append(StepLabel(step=rng.choice(steps), kind=StepLabel.Kind.ADJUDICATION, annotator=annotators[0],
                                    verdict=rng.choice(VERDICTS), skeleton_refs=[1]))
    StepLabel.objects.bulk_create(labels)
    TraceReview.objects.bulk_create(reviews)
    study.primary_judge = judges[0]
    study.save(update_fields=["primary_judge"])


def in_memory(study) -> dict[tuple[str, str], tuple[list[tuple], list[dict], list[list[int]]]]:
    """The recompute as it was before it streamed: the whole study read at once, one hazard estimate
    per (source, channels) over every trace. Per (source, profile): the stored rows, hazard and recoveries."""
    current = services.ensure_profiles(study)
    inputs = sources.read_inputs(study)
    human = sources.human_steps(inputs.labels)
    claims = sources.read_claims(score_jobs.thought_error_steps(inputs))
    out = {}
    for source in inputs.sources():
        steps = sources.source_steps(inputs, source, human=human)
        by_trace, recovered = score_jobs.recovery_of(inputs.traces, steps, claims)
        for name, row in current.items():
            profile = row.as_profile()
            ch_traces, ch_steps = channel_traces(inputs.traces, steps, profile.channels)
            complete = complete_traces(ch_traces, ch_steps).to_numpy()
            estimated = estimate_hazard(ch_traces, ch_steps)
            scored = score_traces(ch_traces, ch_steps, profile, hazard=estimated).loc[complete]
            scored = storage._with_recovery(scored.join(by_trace, on="trace_id"))
            hazard = pinned_hazard_table(list(profile.pinned_hazard)) if profile.pinned_hazard else estimated
            rows = list(zip(scored["trace_id"].tolist(), *storage._column_lists(scored), strict=True))
            out[(source, name)] = (rows, json.loads(json.dumps(to_records(hazard))), recovered)
    return out


def stored(study) -> dict[tuple[str, str], tuple[list[tuple], list[dict], list[list[int]]]]:
    out = {}
    for s in ScoreSet.objects.filter(study=study).select_related("profile"):
        rows = list(TraceScore.objects.filter(score_set=s).order_by("trace_id")
                    .values_list("trace_id", *storage.VALUE_COLUMNS))
        out[(s.source, s.profile.name)] = (rows, s.hazard, s.recoveries)
        assert s.n_traces == len(rows)
    return out


@pytest.fixture
def many_chunks(study, owner, member):
    random_study(study, [owner, member])
    services.do_create_profile(study, "thought", {"channels": "thought"}, user=owner)
    services.do_create_profile(study, "both", {"channels": "both", "prm_hazard": True}, user=owner)
    services.do_create_profile(study, "pinned", {"pinned_hazard": [0.1, 0.2, 0.3]}, user=owner)
    return study


@pytest.mark.parametrize("chunk_size", [3, 1000])
def test_a_streamed_recompute_stores_what_the_whole_study_in_memory_gives(many_chunks, chunk_size):
    expected = in_memory(many_chunks)
    result = score_jobs.recompute(many_chunks, warm=False, chunk_size=chunk_size)
    assert result["chunks"] == -(-60 // chunk_size)
    got = stored(many_chunks)
    assert set(got) == set(expected)
    assert {source for source, _ in got} == {"final", "human", "judge:alpha", "judge:beta"}
    for key, (rows, hazard, recoveries) in expected.items():
        assert got[key][0] == rows, key  # every value, floats compared exactly (NaN stored as null)
        assert got[key][1] == hazard, key
        assert got[key][2] == recoveries, key
    # The data's traces and sources are actually varied: thought recoveries and incomplete traces.
    assert any(rec for _, _, rec in expected.values())
    assert len(got[("judge:beta", "default")][0]) < len(got[("judge:alpha", "default")][0])


def test_a_recompute_swaps_whole_sets_in_and_leaves_no_staging_set(many_chunks):
    score_jobs.recompute(many_chunks, warm=False, chunk_size=25)
    before = {(s.source, s.profile_id): s.token for s in ScoreSet.objects.filter(study=many_chunks)}
    score_jobs.recompute(many_chunks, warm=False, chunk_size=25)
    after = {(s.source, s.profile_id): s.token for s in ScoreSet.objects.filter(study=many_chunks)}
    assert set(after) == set(before)
    assert all(after[k] != before[k] for k in before)  # every set replaced, with a new token
    assert not ScoreSet.objects.filter(source__startswith=storage.STAGING).exists()


# ---------------------------------------------------------------------------
# The score job as a spread run of the run engine (scoring.runclient)


def score_job(study):
    from annotation.models import Job

    return Job.objects.create(study=study, kind=Job.Kind.SCORE, params={"profiles": None, "reason": "test"})


def started_run(study, settings, size: int, *, inline: bool = True):
    """A score job's run, planned but not worked: its first pass's chunks wait for any worker."""
    from runs import engine
    from scoring.models import ScoreRun

    settings.SCORING_CHUNK_TRACES = size
    job = score_job(study)
    record = engine.attach(job, "score", lambda job, run: ScoreRun.objects.create(job=job, run=run, inline=inline))
    engine.plan_run(record.run_id, queue=False)
    record.refresh_from_db()
    record.run.refresh_from_db()
    return job, record


#: The third phase's steps: every stored summary (registered by the apps, in INSTALLED_APPS order), then
#: the cache warm-up.
SUMMARY_STEPS = ["annotation.study_summary_writer.refresh", "agreement.stored_writer.refresh",
                 "faithfulness.evidence.refresh_summaries", score_jobs.WARM]


def stored_summaries(study) -> dict:
    """What the third phase stores of ``study``, without what differs between two runs of the same data
    (times, the job, row pks)."""
    from agreement.models import StoredDisagreementChunk, StoredReport
    from annotation.models import StudySummary, SummaryDisagreement
    from faithfulness.models import EvidenceSummary

    def timeless(value):
        if isinstance(value, dict):  # the agreement report says when the score sets it read were computed
            return {k: timeless(v) for k, v in value.items() if k != "computed_at"}
        return [timeless(v) for v in value] if isinstance(value, list) else value

    def dump(value) -> str:
        return json.dumps(timeless(value), sort_keys=True)  # NaN != NaN: compare the JSON text

    return {
        "study": dump(StudySummary.objects.get(study=study).counts),
        "disagreement steps": sorted(SummaryDisagreement.objects.filter(study=study).values_list("step_id", flat=True)),
        "agreement": sorted((r.kind, r.key, dump(r.data), r.n_disagreements, r.stale)
                            for r in StoredReport.objects.filter(study=study)),
        "agreement chunks": sorted((c.report.kind, c.number, dump(c.rows))
                                   for c in StoredDisagreementChunk.objects.filter(report__study=study)
                                   .select_related("report")),
        "evidence": sorted((e.model, e.policy, dump(e.data)) for e in EvidenceSummary.objects.filter(study=study)),
    }


def forget_summaries(study) -> None:
    from agreement.models import StoredReport
    from annotation.models import StudySummary, SummaryDisagreement
    from faithfulness.models import EvidenceSummary

    for model in (StudySummary, SummaryDisagreement, StoredReport, EvidenceSummary):
        model.objects.filter(study=study).delete()


def final_leaderboard_cached(study) -> bool:
    from django.core.cache import cache

    from scoring import analytics

    score_set = ScoreSet.objects.get(study=study, source=sources.FINAL, profile=services.default_profile(study))
    return cache.get(analytics._key("leaderboard-v2", score_set, "model", "", "")) is not None


def test_the_score_job_is_a_run_whose_chunks_two_workers_share(many_chunks, settings):
    from django.core.cache import cache

    from annotation.models import Job
    from runs import engine
    from runs.models import RunChunk

    expected = in_memory(many_chunks)
    # What the inline recompute stores; the run below must store it anew.
    score_jobs.recompute(many_chunks, warm=False, chunk_size=12)
    inline = stored_summaries(many_chunks)
    forget_summaries(many_chunks)
    cache.clear()
    before = {(s.source, s.profile_id): s.token for s in ScoreSet.objects.filter(study=many_chunks)}

    job, record = started_run(many_chunks, settings, 12)
    run = record.run
    assert engine.is_spread(run) and run.lanes == 5
    assert record.summaries == SUMMARY_STEPS
    first = list(run.chunks.order_by("index").values_list("pk", flat=True))
    assert len(first) == 5
    a, b = "node-a/boot/1", "node-b/boot/2"
    # Two workers take the first pass's chunks as they come; the last one's commit adds the second pass.
    nxt = engine.process_chunk(first[0], a)
    for pk in first[1:]:
        nxt = engine.process_chunk(pk, b if pk % 2 else a)
    record.refresh_from_db()
    assert record.phase == "scores" and run.chunks.count() == 10
    assert nxt == run.chunks.get(index=5).pk
    job.refresh_from_db()
    assert (job.done, job.total) == (5, 10 + 4)  # the summary steps counted from the first pass's end
    while run.chunks.get(pk=nxt).index < 9:
        nxt = engine.process_chunk(nxt, b if nxt % 2 else a)
    unpublished = {(s.source, s.profile_id): s.token for s in ScoreSet.objects.filter(study=many_chunks)
                   .exclude(source__startswith=storage.STAGING)}
    assert unpublished == before  # nothing published before the second pass's last chunk
    # The second pass's last chunk publishes the sets and adds one chunk per summary step.
    nxt = engine.process_chunk(nxt, a)
    record.refresh_from_db()
    job.refresh_from_db()
    assert record.phase == "summaries" and (job.done, job.total) == (10, 14)
    assert stored(many_chunks) == expected  # published
    third = list(run.chunks.filter(index__gte=10).order_by("index").values_list("index", "items", "status"))
    assert third == [(10 + j, [10 + j], RunChunk.Status.PENDING) for j in range(4)]
    assert not final_leaderboard_cached(many_chunks)
    # Each summary step commits as a chunk of its own, whichever worker takes it.
    done = []
    while nxt is not None:
        index = run.chunks.get(pk=nxt).index
        nxt = engine.process_chunk(nxt, b if index % 2 else a)
        job.refresh_from_db()
        done.append((index, job.done))
    assert done == [(10, 11), (11, 12), (12, 13), (13, 14)]
    job.refresh_from_db()
    record.refresh_from_db()
    assert job.status == Job.Status.SUCCEEDED and (job.done, job.total) == (14, 14)
    assert record.phase == "published"
    assert job.result["rows"] == sum(len(rows) for rows, _, _ in expected.values())
    assert set(RunChunk.objects.filter(run=run).values_list("holder", flat=True)) == {a, b}
    assert set(RunChunk.objects.filter(run=run, index__gte=10).values_list("holder", flat=True)) == {a, b}
    assert stored(many_chunks) == expected
    assert stored_summaries(many_chunks) == inline
    assert final_leaderboard_cached(many_chunks)


def test_the_summary_steps_need_nothing_of_each_other(many_chunks, settings):
    """The third phase's chunks run at once, in any order (score_jobs.summary_steps). Worked last first
    -- the agreement reports before the study summary they could read who reviewed from, with none stored
    (a change of the data deletes it) -- they store what the inline recompute does in the registered order."""
    from annotation.models import Job, StudySummary
    from runs import engine

    score_jobs.recompute(many_chunks, warm=False, chunk_size=12)
    inline = stored_summaries(many_chunks)
    forget_summaries(many_chunks)
    job, record = started_run(many_chunks, settings, 12)
    run = record.run
    nxt = run.chunks.get(index=0).pk
    while run.chunks.filter(index__gte=10).count() == 0:
        nxt = engine.process_chunk(nxt, "node-a/boot/1")
    assert not StudySummary.objects.filter(study=many_chunks).exists()
    for chunk in run.chunks.filter(index__gte=10).order_by("-index"):
        engine.process_chunk(chunk.pk, "node-b/boot/2")
    job.refresh_from_db()
    assert job.status == Job.Status.SUCCEEDED
    assert stored_summaries(many_chunks) == inline


def test_the_summary_steps_are_queued_to_as_many_workers(many_chunks, settings, django_capture_on_commit_callbacks):
    """A study of one chunk of traces was planned with one lane; its run takes one per summary step when it
    adds them, so that the queued tasks go to that many free worker processes at once."""
    from annotation.models import Job
    from runs import engine

    job, record = started_run(many_chunks, settings, 1000, inline=False)
    run = record.run
    assert run.lanes == 1
    with django_capture_on_commit_callbacks(execute=False) as queued:
        engine.process_chunk(run.chunks.get(index=0).pk, "node-a/boot/1")
    assert len(queued) == 1  # the second pass: one chunk
    with django_capture_on_commit_callbacks(execute=False) as queued:
        engine.process_chunk(run.chunks.get(index=1).pk, "node-a/boot/1")
    assert len(queued) == 4  # one task per summary step
    fresh = type(run).objects.get(pk=run.pk)
    assert fresh.lanes == 4
    assert sorted(fresh.chunks.filter(index__gte=2).values_list("lane", flat=True)) == [0, 1, 2, 3]
    # Other workers took every summary step before the process that added them looked for one: that
    # process, which read the run with one lane, must not end the run under them.
    for chunk in fresh.chunks.filter(index__gte=2):
        assert engine.claim_chunk(chunk.pk, "node-b/boot/2")
    engine.finalize_when_done(run)
    job.refresh_from_db()
    assert job.status == Job.Status.RUNNING


def test_a_cancelled_score_run_keeps_the_sets_it_would_have_replaced(many_chunks, settings):
    from annotation import jobs
    from annotation.models import Job
    from runs import engine

    score_jobs.recompute(many_chunks, warm=False)
    before = {(s.source, s.profile_id): s.token for s in ScoreSet.objects.filter(study=many_chunks)}
    job, record = started_run(many_chunks, settings, 12)
    nxt = engine.process_chunk(record.run.chunks.get(index=0).pk, "node-a/boot/1")
    jobs.cancel(job)
    assert engine.process_chunk(nxt, "node-a/boot/1") is None
    job.refresh_from_db()
    assert job.status == Job.Status.CANCELLED
    after = {(s.source, s.profile_id): s.token for s in ScoreSet.objects.filter(study=many_chunks)}
    assert after == before  # no staging set left, the old sets untouched


def summary_phase(study, settings):
    """A score run worked up to its third phase: the sets published, the summary steps pending."""
    from runs import engine

    job, record = started_run(study, settings, 30)
    run = record.run
    nxt = run.chunks.get(index=0).pk
    while run.chunks.filter(index__gte=4).count() == 0:
        nxt = engine.process_chunk(nxt, "node-a/boot/1")
    record.refresh_from_db()
    assert record.phase == "summaries"
    return job, record


def test_a_score_run_cancelled_while_storing_its_summaries_ends_cancelled(many_chunks, settings):
    from annotation import jobs
    from annotation.models import Job, StudySummary
    from runs import engine
    from runs.models import RunChunk

    expected = in_memory(many_chunks)
    forget_summaries(many_chunks)
    job, record = summary_phase(many_chunks, settings)
    chunks = list(record.run.chunks.filter(index__gte=4).order_by("index").values_list("pk", flat=True))
    engine.process_chunk(chunks[0], "node-a/boot/1")  # the study summary is stored
    jobs.cancel(job)
    assert engine.process_chunk(chunks[1], "node-b/boot/2") is None
    job.refresh_from_db()
    assert job.status == Job.Status.CANCELLED and job.finished
    statuses = list(record.run.chunks.filter(index__gte=4).order_by("index").values_list("status", flat=True))
    assert statuses == [RunChunk.Status.DONE] + [RunChunk.Status.SKIPPED] * 3
    assert stored(many_chunks) == expected  # the scores were published before the cancel
    assert StudySummary.objects.filter(study=many_chunks).exists()


def test_a_summary_that_fails_leaves_what_was_stored_and_the_job_failed(many_chunks, settings, monkeypatch):
    """The agreement writer stores two reports; the second one fails, every time: the first is not left
    written beside the older second (the step's own transaction), and after the engine's attempts the
    job ends failed; the other summaries are stored or not as their own chunks went."""
    from agreement import stored as agreement_stored
    from agreement.models import StoredReport
    from annotation.models import Job
    from runs import engine

    score_jobs.recompute(many_chunks, warm=False)
    old = {r.kind: (r.computed_at, json.dumps(r.data, sort_keys=True))
           for r in StoredReport.objects.filter(study=many_chunks)}
    assert set(old) == {StoredReport.Kind.PAIR, StoredReport.Kind.ANNOTATORS}
    write = agreement_stored.write

    def failing(study, kind, *args, **kwargs):
        if kind == StoredReport.Kind.ANNOTATORS:
            raise RuntimeError("the disk is full")
        return write(study, kind, *args, **kwargs)

    monkeypatch.setattr(agreement_stored, "write", failing)
    job, record = summary_phase(many_chunks, settings)
    chunk = record.run.chunks.get(index=4 + SUMMARY_STEPS.index("agreement.stored_writer.refresh"))
    holder = "node-a/boot/1"
    again: int | None = chunk.pk
    attempts = 0
    while again is not None:  # what the chunk task does: give it back, try again, up to the last attempt
        with pytest.raises(RuntimeError, match="the disk is full"):
            engine.process_chunk(again, holder)
        attempts += 1
        again = engine.release_failed_chunk(again, holder, "RuntimeError: the disk is full")
    assert attempts == engine.MAX_CHUNK_ATTEMPTS
    job.refresh_from_db()
    assert job.status == Job.Status.FAILED and "the disk is full" in job.error
    now = {r.kind: (r.computed_at, json.dumps(r.data, sort_keys=True))
           for r in StoredReport.objects.filter(study=many_chunks)}
    assert now == old


def test_a_score_run_resumes_the_chunk_of_a_worker_that_died(many_chunks, settings):
    from datetime import timedelta

    from django.utils import timezone

    from annotation.models import Job
    from runs import engine
    from runs.models import RunChunk

    expected = in_memory(many_chunks)
    job, record = started_run(many_chunks, settings, 30)
    chunk = record.run.chunks.get(index=0)
    assert engine.claim_chunk(chunk.pk, "gone/boot/1")  # then the worker died, its lease ran out
    RunChunk.objects.filter(pk=chunk.pk).update(lease_until=timezone.now() - timedelta(seconds=1))
    engine.resume_stalled()  # what a starting worker does; eager here: the queued task works the run
    job.refresh_from_db()
    assert job.status == Job.Status.SUCCEEDED, job.error
    assert stored(many_chunks) == expected
