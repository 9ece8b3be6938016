"""Planning a step-importance run (no model call; in the run's job): which traces, which thought steps,
and the rollouts they need -- N resamples (and one forced answer) at the prefix before and the prefix
through every measured step."""

from __future__ import annotations

from django.db.models import QuerySet

from anchors.models import ImportanceRun, Rollout, Status
from annotation import scopes
from annotation.models import Trace
from faithfulness.loading import THOUGHT, TraceData, load_traces, subject_traces
from subjects.models import SubjectModel


def measured_steps(n_steps: int, *, stride: int = 1, steps: list[int] | None = None) -> list[int]:
    """The 1-based thought steps a run measures: the given ones that exist, else every ``stride``-th from
    the first (the last step always, so the answer's own step is never skipped)."""
    if steps:
        return sorted({s for s in steps if 1 <= s <= n_steps})
    chosen = set(range(1, n_steps + 1, max(1, stride)))
    if n_steps:
        chosen.add(n_steps)
    return sorted(chosen)


def positions(measured: list[int]) -> list[int]:
    """The prefix positions the measured steps need: before (i-1) and through (i) each."""
    return sorted({p for i in measured for p in (i - 1, i)})


def traces_of(subject: SubjectModel, *, trace_ids: list[str] | None = None, cohort: str = "",
              limit: int | None = None) -> QuerySet[Trace]:
    """The subject model's generated traces with a thought a run reads: the named ones only, or those of a
    saved cohort, then the first ``limit`` by id."""
    qs = subject_traces(subject).filter(n_thought_steps__gt=0).order_by("pk")
    if trace_ids:
        qs = qs.filter(trace_id__in=trace_ids)
    in_cohort = scopes.cohort_traces(subject.study, cohort or "")
    if in_cohort is not None:
        qs = qs.filter(pk__in=in_cohort)
    if limit is not None:
        qs = qs.filter(pk__in=list(qs.values_list("pk", flat=True)[:limit]))
    return qs


def plan_rollouts(record: ImportanceRun, traces: list[TraceData]) -> list[Rollout]:
    p = record.params
    samples, seed, forced = int(p["samples"]), int(p.get("seed") or 0), bool(p.get("forced", True))
    out: list[Rollout] = []
    for t in traces:
        for pos in positions(measured_steps(len(t.spans), stride=int(p.get("stride") or 1), steps=p.get("steps"))):
            chars = t.spans[pos - 1][1] if pos else 0
            for s in range(samples):
                # Each sample its own seed: the same prefix asked twice with one seed is one cached answer.
                out.append(Rollout(irun=record, trace_id=t.pk, position=pos, kind=Rollout.Kind.RESAMPLE, sample=s,
                                   seed=seed + s, prefix_chars=chars))
            if forced:
                out.append(Rollout(irun=record, trace_id=t.pk, position=pos, kind=Rollout.Kind.FORCED, sample=0,
                                   seed=seed, prefix_chars=chars))
    return out


def plan(record: ImportanceRun) -> list[int]:
    """The run's rollouts, written now; returns the pks waiting for a continuation."""
    p = record.params
    qs = traces_of(record.subject, trace_ids=p.get("trace_ids") or None, cohort=p.get("cohort") or "",
                   limit=p.get("limit"))
    traces = load_traces(qs, channel=THOUGHT)
    skipped = {t.trace_id: "the trace has no thought steps" for t in traces if not t.spans}
    Rollout.objects.bulk_create(plan_rollouts(record, [t for t in traces if t.spans]), batch_size=2000)
    ImportanceRun.objects.filter(pk=record.pk).update(traces=len(traces) - len(skipped), skipped=skipped)
    return list(record.rollouts.filter(status=Status.PENDING).order_by("pk").values_list("pk", flat=True))
