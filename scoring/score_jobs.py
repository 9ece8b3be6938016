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
from collections.abc import Callable, Iterable
from typing import Any

import numpy as np
import pandas as pd
from django.db import DatabaseError, InterfaceError, OperationalError
from django.utils import timezone

from annotation import jobs
from annotation.models import Job, Study
from scoring import analytics, hooks, sources, storage
from scoring.core.aggregate import to_records
from scoring.core.hazard import pinned_hazard_table
from scoring.core.labels import INVALID, complete_traces
from scoring.core.scores import estimate_hazard, score_traces
from scoring.core.thought import channel_traces, recoveries, recovery_by_trace
from scoring.models import ScoreSet
from scoring.services import default_profile, ensure_profiles

log = logging.getLogger("scoring")

#: Errors worth retrying: the database or the network went away for a moment.
TRANSIENT_ERRORS = (OperationalError, InterfaceError, ConnectionError)


class JobCancelled(Exception):
    pass


def run_score_job(job_id: int, *, progress: Callable[[int, int], None] | None = None,
                  final_attempt: bool = True) -> dict[str, Any] | None:
    """The body of every recompute (Celery task and ``score --inline``).

    Safe to run twice: a finished job is not claimed again; every write
    replaces a whole (source, profile) set in one transaction. A transient
    database error on a non-final attempt leaves the job running so the
    retry claims it again.
    """
    if not jobs.claim(job_id):
        return None
    job = Job.objects.select_related("study").get(pk=job_id)

    def publish(done: int, total: int) -> None:
        jobs.report_progress(job_id, done, total)
        if progress:
            progress(done, total)

    def should_stop() -> bool:
        return Job.objects.filter(pk=job_id, cancel_requested=True).exists()

    try:
        result = recompute(job.study, profiles=job.params.get("profiles"), progress=publish,
                           should_stop=should_stop, job=job)
    except JobCancelled:
        jobs.finish(job_id, status=Job.Status.CANCELLED, error="cancelled")
        return None
    except TRANSIENT_ERRORS:
        if final_attempt:
            jobs.finish(job_id, status=Job.Status.FAILED, error="the database was not reachable; gave up")
        raise
    except Exception as exc:
        jobs.finish(job_id, status=Job.Status.FAILED, error=f"{type(exc).__name__}: {exc}")
        raise
    jobs.finish(job_id, status=Job.Status.SUCCEEDED, result=result, done=result["steps_done"],
                total=result["steps_done"])
    return result


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


def recompute(study: Study, *, profiles: Iterable[str] | None = None, progress=None, should_stop=None,
              job: Job | None = None, warm: bool = True) -> dict[str, Any]:
    """Recompute and store the scores of ``study`` for every label source
    under the given profiles (all current ones by default)."""
    timings: dict[str, float] = {}
    t0 = time.perf_counter()
    current = ensure_profiles(study)
    names = list(current) if profiles is None else [n for n in profiles if n in current]
    default = default_profile(study, current)
    names.sort(key=lambda n: (n != default.name, n))  # the default first: pages need it soonest
    inputs = sources.read_inputs(study)
    timings["read"] = time.perf_counter() - t0

    src_names = inputs.sources()
    total = len(src_names) * len(names)
    done = 0
    if progress:
        progress(0, total)
    rows = 0
    timings["label_sources"] = timings["arithmetic"] = timings["write"] = 0.0
    ts = time.perf_counter()
    human = sources.human_steps(inputs.labels)
    timings["label_sources"] += time.perf_counter() - ts
    ts = time.perf_counter()
    claims = sources.read_claims(thought_error_steps(inputs))
    timings["claims"] = time.perf_counter() - ts
    for source in src_names:
        ts = time.perf_counter()
        steps = sources.source_steps(inputs, source, human=human)
        timings["label_sources"] += time.perf_counter() - ts
        ta = time.perf_counter()
        by_trace, recovered = recovery_of(inputs.traces, steps, claims)
        timings["arithmetic"] += time.perf_counter() - ta
        # A profile reads one channel selection; profiles that read the same
        # one share its steps, completeness and hazard estimate.
        by_channels: dict[str, tuple[pd.DataFrame, pd.DataFrame, np.ndarray, pd.DataFrame]] = {}
        for name in names:
            if should_stop and should_stop():
                raise JobCancelled()
            ta = time.perf_counter()
            profile = current[name].as_profile()
            if profile.channels not in by_channels:
                ch_traces, ch_steps = channel_traces(inputs.traces, steps, profile.channels)
                by_channels[profile.channels] = (ch_traces, ch_steps, complete_traces(ch_traces, ch_steps).to_numpy(),
                                                 estimate_hazard(ch_traces, ch_steps))
            ch_traces, ch_steps, complete, estimated = by_channels[profile.channels]
            scored = score_traces(ch_traces, ch_steps, profile, hazard=estimated)
            scored = scored.loc[complete]
            scored = scored.join(by_trace, on="trace_id")
            hazard = (pinned_hazard_table(list(profile.pinned_hazard)) if profile.pinned_hazard is not None
                      else estimated)
            tw = time.perf_counter()
            timings["arithmetic"] += tw - ta
            storage.write_scores(study, source, current[name], scored, to_records(hazard), job=job,
                                 recoveries=recovered)
            timings["write"] += time.perf_counter() - tw
            rows += len(scored)
            done += 1
            if progress:
                progress(done, total)
    # Old profile versions and sources that no longer exist (a judge deleted,
    # its labels gone) leave no stale scores behind.
    tc = time.perf_counter()
    keep_profiles = [current[n].pk for n in names]
    stale = ScoreSet.objects.filter(study=study, profile__name__in=names).exclude(profile_id__in=keep_profiles)
    stale_sources = ScoreSet.objects.filter(study=study, profile_id__in=keep_profiles).exclude(source__in=src_names)
    storage.delete_sets(list(stale.values_list("pk", flat=True)) + list(stale_sources.values_list("pk", flat=True)))
    timings["cleanup"] = time.perf_counter() - tc
    ts = time.perf_counter()
    # Stored aggregates of other apps, refreshed with the scores (scoring.hooks: registered in their ready()).
    for summary in hooks.summaries():
        summary(study, job, profiles is None)
    timings["summaries"] = time.perf_counter() - ts
    timings["total"] = time.perf_counter() - t0
    if warm:
        tw = time.perf_counter()
        try:
            analytics.warm(study, default)
        except DatabaseError:  # a cold cache is slower, not wrong
            log.exception("warming the analytics cache of study %s failed", study.pk)
        timings["warm_cache"] = time.perf_counter() - tw
    return {
        "sources": src_names,
        "profiles": names,
        "traces": len(inputs.traces),
        "labels": len(inputs.labels),
        "rows": rows,
        "steps_done": total,
        "seconds": {k: round(v, 3) for k, v in timings.items()},
        "finished_at": timezone.now().isoformat(),
    }

