"""Running a recompute: the body of the score job (Celery task
``scoring.tasks.recompute_scores`` and ``score --inline``) and ``recompute``,
which reads a study's labels, scores every label source under every current
profile and stores the score sets, then warms the analytics cache.

Above ``scoring.services`` (profiles, lookups, queueing) and
``scoring.analytics`` in the dependency order: nothing below imports it.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
from django.conf import settings
from django.db import DatabaseError, InterfaceError, OperationalError, transaction
from django.utils import timezone

from annotation import dbstats, jobs
from annotation.models import Job, Study
from scoring import analytics, hooks, sources, storage
from scoring.core.aggregate import to_records
from scoring.core.hazard import add_hazard_counts, hazard_from_counts, pinned_hazard_table
from scoring.core.labels import INVALID, complete_traces
from scoring.core.scores import estimate_hazard_counts, score_traces
from scoring.core.thought import channel_traces, recoveries, recovery_by_trace
from scoring.models import ScoreRun, ScoreSet, ScoringProfile, TraceScore
from scoring.services import default_profile, ensure_profiles

log = logging.getLogger("scoring")

#: Errors worth retrying: the database or the network went away for a moment.
TRANSIENT_ERRORS = (OperationalError, InterfaceError, ConnectionError)


class JobCancelled(Exception):
    pass


def run_score_job(job_id: int, *, progress: Callable[[int, int], None] | None = None,
                  final_attempt: bool = True, inline: bool | None = None) -> dict[str, Any] | None:
    """The body of every recompute of a score job (Celery task and ``score --inline``): the job becomes a
    run of kind "score" (scoring.runclient), whose chunks of traces every free worker process takes
    (``inline``, and in eager mode: all in this process). Returns the job's result once it succeeded here
    (None: cancelled, or worked by the workers).

    Safe to run twice: a finished job is not claimed again, and a job that has its run already is the
    engine's (a lost chunk is taken over when its lease ends). A transient database error on a non-final
    attempt leaves the job running so the retry claims it again.
    """
    from runs import engine  # the run engine loads in the worker only

    if not jobs.claim(job_id):
        return None
    job = Job.objects.select_related("study").get(pk=job_id)
    if ScoreRun.objects.filter(job=job).exists():
        return None  # a re-delivered task: the run is under way
    inline = settings.CELERY_TASK_ALWAYS_EAGER if inline is None else inline
    try:
        record = engine.attach(job, ScoreRun.KIND, lambda job, run: ScoreRun.objects.create(job=job, run=run, inline=inline))
        engine.plan_run(record.run_id, queue=not inline)
        if inline:
            engine.run_inline(record.run, progress=progress)
    except TRANSIENT_ERRORS:
        if final_attempt:
            jobs.finish(job_id, status=Job.Status.FAILED, error="the database was not reachable; gave up")
        raise
    except Exception as exc:
        jobs.finish(job_id, status=Job.Status.FAILED, error=f"{type(exc).__name__}: {exc}")
        storage.delete_staging(job.study, str(job.pk))
        raise
    job.refresh_from_db()
    return job.result if job.status == Job.Status.SUCCEEDED and inline else None


def thought_error_steps(inputs: sources.Inputs) -> dict[int, set[int]]:
    """Trace pk -> its thought steps labelled invalid under any label: only these traces' thought
    steps are read for claims (scoring.core.thought.recoveries)."""
    labels = inputs.labels
    if "n_thought_steps" not in inputs.traces or not len(labels):
        return {}
    t = pd.Series(inputs.traces["n_thought_steps"].to_numpy(), index=inputs.traces["trace_id"].to_numpy())
    in_thought = labels["step"].to_numpy() <= t.reindex(labels["trace_id"].to_numpy(), fill_value=0).to_numpy()
    invalid = (labels["verdict"] == INVALID).to_numpy()
    errors = labels.loc[in_thought & invalid, ["trace_id", "step"]].drop_duplicates()
    out: dict[int, set[int]] = {}
    for tid, step in zip(errors["trace_id"].tolist(), errors["step"].tolist(), strict=True):
        out.setdefault(tid, set()).add(step)
    return out


def recovery_of(traces: pd.DataFrame, steps: pd.DataFrame,
                claims: pd.DataFrame) -> tuple[pd.DataFrame, list[list[int]]]:
    """Per trace (indexed by trace pk) the stored recovery columns, and the
    recovered errors as [trace pk, error step, recovering step]."""
    if "n_thought_steps" not in traces:
        traces = traces.assign(n_thought_steps=0)
    with_errors = steps.loc[steps["trace_id"].isin(claims["trace_id"].unique())] if len(claims) else steps.iloc[:0]
    if len(with_errors):
        with_errors = with_errors.merge(claims, on=["trace_id", "step"], how="left")
    rec = recoveries(traces, with_errors) if len(with_errors) else recoveries(traces, steps.iloc[:0])
    bt = recovery_by_trace(traces, steps, rec)
    out = pd.DataFrame({
        "n_thought_steps": bt["n_thought_steps"].to_numpy(),
        "thought_errors": bt["thought_errors"].to_numpy(),
        "recovered_errors": bt["recovered"].to_numpy(),
        "first_unrecovered": bt["first_unrecovered"].array,
        "lucky_unrecovered": bt["lucky_unrecovered"].to_numpy(),
    }, index=pd.Index(bt["trace_id"].to_numpy(), name="trace_id"))
    done = rec.loc[rec["recovered"].to_numpy(dtype=bool)]
    recovered = [[int(a), int(b), int(c)] for a, b, c in zip(done["trace_id"], done["error_step"],
                                                                done["recovery_step"], strict=True)]
    return out, recovered


#: Traces a recompute reads at a time (settings.SCORING_CHUNK_TRACES): its memory follows this, not the
#: size of the study. 20,000 traces of 10 steps hold about 200k labels (a few tens of MB in pandas).
CHUNK_TRACES = 20_000


def chunk_traces() -> int:
    return int(getattr(settings, "SCORING_CHUNK_TRACES", CHUNK_TRACES))


@dataclass
class Plan:
    """What every chunk of one recompute needs: the profiles (the default first), the channel selections
    they read, the study's chunks of traces, and once the first pass is over the label sources and the
    study-wide hazard table of each (source, channels)."""

    study: Study
    current: dict[str, ScoringProfile]
    names: list[str]
    spans: list[tuple[int, int]]
    key: str
    sources: list[str] = field(default_factory=list)
    hazards: dict[tuple[str, str], pd.DataFrame] = field(default_factory=dict)

    @property
    def channels(self) -> list[str]:
        return list(dict.fromkeys(self.current[n].as_profile().channels for n in self.names))


def make_plan(study: Study, profiles: Iterable[str] | None, key: str, size: int | None = None) -> Plan:
    # Most score jobs follow a bulk write (an import, a judge run) by seconds, before autovacuum has analyzed it:
    # every chunk's reads would be planned from statistics of the data before it (annotation.dbstats).
    dbstats.refresh_stale(sources.READS)
    current = ensure_profiles(study)
    names = list(current) if profiles is None else [n for n in profiles if n in current]
    default = default_profile(study, current)
    names.sort(key=lambda n: (n != default.name, n))  # the default first: pages need it soonest
    # A study without traces is one empty chunk (no pk lies between 0 and -1): its sets are still written.
    spans = sources.trace_spans(study.pk, size or chunk_traces()) or [(0, -1)]
    return Plan(study, current, names, spans, key)


@dataclass
class Tally:
    """What the first pass adds up over chunks: the judges that labelled something, the hazard counts of
    each (source, channels) (scoring.core.hazard.hazard_counts), the traces and labels read."""

    judges: set[int] = field(default_factory=set)
    counts: dict[tuple[str, str], tuple[np.ndarray, np.ndarray]] = field(default_factory=dict)
    traces: int = 0
    labels: int = 0

    def add(self, other: Tally) -> None:
        self.judges |= other.judges
        for key, c in other.counts.items():
            self.counts[key] = add_hazard_counts(self.counts[key], c) if key in self.counts else c
        self.traces += other.traces
        self.labels += other.labels

    def to_json(self) -> dict[str, Any]:
        return {"judges": sorted(self.judges), "traces": self.traces, "labels": self.labels,
                "counts": [[source, ch, exits.tolist(), events.tolist()]
                           for (source, ch), (exits, events) in self.counts.items()]}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Tally:
        counts = {(source, ch): (np.asarray(exits, dtype=np.int64), np.asarray(events, dtype=np.int64))
                  for source, ch, exits, events in data.get("counts", [])}
        return cls(set(data.get("judges", [])), counts, data.get("traces", 0), data.get("labels", 0))


def chunk_tally(plan: Plan, span: tuple[int, int]) -> Tally:
    """The first pass over one chunk of traces: what the study-wide hazard tables are summed from."""
    inputs = sources.read_inputs(plan.study, span)
    judges = set((-inputs.labels.loc[inputs.labels["src"] < 0, "src"]).unique().tolist())
    human = sources.human_steps(inputs.labels)
    tally = Tally(judges=judges, traces=len(inputs.traces), labels=len(inputs.labels))
    names = [sources.FINAL, sources.HUMAN] + [f"{sources.JUDGE_PREFIX}{n}" for n, pk in inputs.judges.items()
                                             if pk in judges]
    for source in names:
        steps = sources.source_steps(inputs, source, human=human)
        for channels in plan.channels:
            ch_traces, ch_steps = channel_traces(inputs.traces, steps, channels)
            tally.counts[(source, channels)] = estimate_hazard_counts(ch_traces, ch_steps)
    return tally


def conclude(plan: Plan, tally: Tally, names: list[str] | None = None) -> None:
    """After the first pass: the study's label sources (``names``: as concluded before) and the hazard
    table of each (source, channels)."""
    if names is None:
        judges = dict(plan.study.judges.values_list("name", "pk"))
        names = [sources.FINAL, sources.HUMAN] + [f"{sources.JUDGE_PREFIX}{n}" for n in sorted(judges)
                                                  if judges[n] in tally.judges]
    plan.sources = list(names)
    empty = (np.zeros(0, np.int64), np.zeros(0, np.int64))
    plan.hazards = {(source, ch): hazard_from_counts(*tally.counts.get((source, ch), empty))
                    for source in plan.sources for ch in plan.channels}


@dataclass
class Written:
    """What the second pass adds up over chunks, per set: rows written, and per source the recovered
    thought errors (in trace order, as the whole study's would be)."""

    rows: dict[tuple[str, str], int] = field(default_factory=dict)
    recovered: dict[str, list[list[int]]] = field(default_factory=dict)

    def add(self, other: Written) -> None:
        for key, n in other.rows.items():
            self.rows[key] = self.rows.get(key, 0) + n
        for source, rec in other.recovered.items():
            self.recovered.setdefault(source, []).extend(rec)

    def to_json(self) -> dict[str, Any]:
        return {"rows": [[source, name, n] for (source, name), n in self.rows.items()],
                "recovered": self.recovered}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Written:
        return cls({(source, name): n for source, name, n in data.get("rows", [])},
                   {source: list(rec) for source, rec in data.get("recovered", {}).items()})


def staging_set(plan: Plan, source: str, name: str) -> ScoreSet:
    return storage.open_staging(plan.study, source, plan.current[name], plan.key)


def chunk_scores(plan: Plan, span: tuple[int, int], should_stop=None) -> Written:
    """The second pass over one chunk of traces: its scores under every source and profile, with the
    study-wide hazard tables, written into the staging sets (one transaction per set and chunk)."""
    inputs = sources.read_inputs(plan.study, span)
    human = sources.human_steps(inputs.labels)
    claims = sources.read_claims(thought_error_steps(inputs))
    out = Written()
    for source in plan.sources:
        steps = sources.source_steps(inputs, source, human=human)
        by_trace, out.recovered[source] = recovery_of(inputs.traces, steps, claims)
        # A profile reads one channel selection; profiles that read the same one share its steps and
        # completeness.
        by_channels: dict[str, tuple[pd.DataFrame, pd.DataFrame, np.ndarray]] = {}
        for name in plan.names:
            if should_stop and should_stop():
                raise JobCancelled()
            profile = plan.current[name].as_profile()
            if profile.channels not in by_channels:
                ch_traces, ch_steps = channel_traces(inputs.traces, steps, profile.channels)
                by_channels[profile.channels] = (ch_traces, ch_steps,
                                                 complete_traces(ch_traces, ch_steps).to_numpy())
            ch_traces, ch_steps, complete = by_channels[profile.channels]
            scored = score_traces(ch_traces, ch_steps, profile, hazard=plan.hazards[(source, profile.channels)])
            scored = scored.loc[complete].join(by_trace, on="trace_id")
            storage.write_chunk(staging_set(plan, source, name), scored, span)
            out.rows[(source, name)] = len(scored)
    return out


def publish(plan: Plan, written: Written, job: Job | None) -> int:
    """Swap every staging set in, then drop the scores of old profile versions and of sources that no
    longer exist (a judge deleted, its labels gone). Returns the rows published."""
    for source in plan.sources:
        for name in plan.names:
            profile = plan.current[name].as_profile()
            hazard = (pinned_hazard_table(list(profile.pinned_hazard)) if profile.pinned_hazard is not None
                      else plan.hazards[(source, profile.channels)])
            storage.publish(staging_set(plan, source, name), source, n_traces=written.rows.get((source, name), 0),
                            hazard=to_records(hazard), recoveries=written.recovered.get(source, []), job=job)
    keep_profiles = [plan.current[n].pk for n in plan.names]
    stale = ScoreSet.objects.filter(study=plan.study, profile__name__in=plan.names).exclude(
        profile_id__in=keep_profiles)
    stale_sources = ScoreSet.objects.filter(study=plan.study, profile_id__in=keep_profiles).exclude(
        source__in=plan.sources).exclude(source__startswith=storage.STAGING)
    storage.delete_sets(list(stale.values_list("pk", flat=True)) + list(stale_sources.values_list("pk", flat=True)))
    # The stored summaries and the pages read the scores just swapped in (8.8M rows at 1M traces).
    rows = sum(written.rows.values())
    dbstats.refresh_stale([TraceScore], written=rows)
    return rows


def warm_cache(study: Study) -> None:
    try:
        analytics.warm(study, default_profile(study))
    except DatabaseError:  # a cold cache is slower, not wrong
        log.exception("warming the analytics cache of study %s failed", study.pk)


#: The cache warm-up's name among the third phase's items (summary_steps).
WARM = "warm_cache"


def summary_steps(*, warm: bool = True) -> list[str]:
    """The third phase of a recompute, once the new score sets are published: every stored summary of
    another app (scoring.hooks, by name, in the order registered), then the warm-up of the analytics cache.
    A score run makes each an item of its own, worked at the same time as the others by the free worker
    processes, so none may need what another one stores. None does:

    * the study summary (annotation.study_summary_writer) and the evidence summaries (faithfulness.evidence)
      read only the data;
    * the agreement reports (agreement.stored_writer) read who reviewed from the study summary when one is
      current (agreement.data.annotator_names), else the same list from the reviews. A stored summary is
      current only while the data is as it was when it was written (annotation.signals.data_changed deletes
      it), so before, while or after the study summary is written anew the writer reads the same people.
      ``data_version`` reads the study summary's time too, but only for the pages' cache keys, which the
      writer does not use;
    * the warm-up reads only the published score sets.

    tests/scoring/test_streamed_recompute.py stores them in both orders and finds the same."""
    return hooks.summary_names() + ([WARM] if warm else [])


def summary_step(name: str, study: Study, job: Job | None, whole: bool) -> None:
    """One item of the third phase (summary_steps), the same in a score run's chunk (scoring.runclient) and
    in ``recompute``. A stored summary is written in a transaction of its own, so one that fails half-way
    leaves what was stored before (agreement writes two reports, each of which would otherwise commit alone);
    ``whole``: the job recomputes every profile (scoring.hooks)."""
    if name == WARM:
        warm_cache(study)  # the cache is not the database's: nothing to roll back
        return
    with transaction.atomic():
        hooks.summary(name)(study, job, whole)


def plan_of(record: ScoreRun) -> Plan:
    """The plan a score run was planned with (scoring.runclient.ScoreClient.plan), as every chunk reads it:
    the same profile versions and chunks, and once the first pass is over its sources and hazard tables."""
    versions = {p.pk: p for p in ScoringProfile.objects.filter(pk__in=list(record.profiles.values()))}
    current = {name: versions[pk] for name, pk in record.profiles.items() if pk in versions}
    plan = Plan(record.job.study, current, list(current), [tuple(span) for span in record.spans],
                str(record.job_id))
    if record.phase != ScoreRun.Phase.HAZARDS:
        conclude(plan, Tally.from_json(record.tally), record.sources)
    return plan


def merge(record_id: int, results: list[tuple[int, Tally | Written | None]]) -> None:
    """Add what chunks of a score run found to its record (inside the chunk's transaction, the record
    locked: two processes committing at once both count). The last chunk of the first pass concludes it
    and adds the second pass's chunks (items K..2K-1); the last of the second swaps the new score sets in
    and adds the third phase's chunks (items 2K..2K+S-1, one per summary step: summary_steps), each queued
    to every worker unless the run is worked inline; the last of the third ends the phases."""
    from runs import engine

    record = ScoreRun.objects.select_for_update().select_related("job__study", "run").get(pk=record_id)
    plan = plan_of(record)
    k = len(plan.spans)
    tally, written = Tally.from_json(record.tally), Written.from_json(record.written)
    for item, result in results:
        if item < 2 * k:  # a summary step's result is nothing: what it stores is stored
            (tally if item < k else written).add(result)  # type: ignore[arg-type]
        record.merged += 1
    record.tally, record.written = tally.to_json(), written.to_json()
    if record.phase == ScoreRun.Phase.HAZARDS and record.merged >= k:
        conclude(plan, tally)
        record.sources, record.phase, record.merged = plan.sources, ScoreRun.Phase.SCORES, 0
        engine.add_chunks(record.run, list(range(k, 2 * k)), 1, first_index=k)
        Job.objects.filter(pk=record.job_id).update(total=2 * k + len(record.summaries))
        if not record.inline:
            engine.queue_first(record.run)
    elif record.phase == ScoreRun.Phase.SCORES and record.merged >= k:
        publish(plan, written, record.job)
        record.merged = 0
        steps = len(record.summaries)
        record.phase = ScoreRun.Phase.SUMMARIES if steps else ScoreRun.Phase.PUBLISHED
        if steps:
            run = record.run
            # As many tasks as summaries, so that each goes to a free worker process at once (a study of
            # fewer chunks than summaries was planned with fewer lanes, and a spread run queues one task
            # per lane: queue_first).
            run.lanes = max(run.lanes, min(engine.SPREAD_TASKS, steps))
            run.save(update_fields=["lanes"])
            engine.add_chunks(run, list(range(2 * k, 2 * k + steps)), 1, first_index=2 * k)
            if not record.inline:
                engine.queue_first(run)
    elif record.phase == ScoreRun.Phase.SUMMARIES and record.merged >= len(record.summaries):
        record.phase = ScoreRun.Phase.PUBLISHED
    record.save()


def recompute(study: Study, *, profiles: Iterable[str] | None = None, progress=None, should_stop=None,
              job: Job | None = None, warm: bool = True, chunk_size: int | None = None) -> dict[str, Any]:
    """Recompute and store the scores of ``study`` for every label source under the given profiles (all
    current ones by default), streamed: chunks of ``chunk_size`` traces (SCORING_CHUNK_TRACES) are read
    twice, once to add up the study-wide hazard tables, once to score and write them, so memory follows
    the chunk, not the study; then the stored summaries and the cache warm-up (summary_steps), one after the
    other. Progress counts chunk passes (2 per chunk)."""
    timings: dict[str, float] = {}
    t0 = time.perf_counter()
    plan = make_plan(study, profiles, str(job.pk) if job is not None else uuid.uuid4().hex[:12], chunk_size)
    total = 2 * len(plan.spans)
    if progress:
        progress(0, total)
    done = 0
    tally = Tally()
    storage.delete_staging(study, plan.key)
    try:
        for span in plan.spans:
            if should_stop and should_stop():
                raise JobCancelled()
            tally.add(chunk_tally(plan, span))
            done += 1
            if progress:
                progress(done, total)
        conclude(plan, tally)
        timings["hazards"] = time.perf_counter() - t0
        ts = time.perf_counter()
        written = Written()
        for span in plan.spans:
            written.add(chunk_scores(plan, span, should_stop))
            done += 1
            if progress:
                progress(done, total)
        timings["scores"] = time.perf_counter() - ts
        ts = time.perf_counter()
        rows = publish(plan, written, job)
        timings["publish"] = time.perf_counter() - ts
    except BaseException:
        storage.delete_staging(study, plan.key)
        raise
    # The third phase, one step after the other here (a score run works them at once): the stored
    # aggregates of other apps (scoring.hooks: registered in their ready()), then the cache warm-up.
    ts = time.perf_counter()
    for name in summary_steps(warm=False):
        summary_step(name, study, job, profiles is None)
    timings["summaries"] = time.perf_counter() - ts
    timings["total"] = time.perf_counter() - t0
    if warm:
        tw = time.perf_counter()
        summary_step(WARM, study, job, profiles is None)
        timings["warm_cache"] = time.perf_counter() - tw
    return {
        "sources": plan.sources,
        "profiles": plan.names,
        "traces": tally.traces,
        "labels": tally.labels,
        "rows": rows,
        "chunks": len(plan.spans),
        "steps_done": len(plan.sources) * len(plan.names),
        "seconds": {k: round(v, 3) for k, v in timings.items()},
        "finished_at": timezone.now().isoformat(),
    }
