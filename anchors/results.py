"""The measures of a step-importance run from its stored rollouts (anchors.core), written as StepImportance
rows of source "run". Recomputable at any time from the rollouts (``store``). The measures are per trace, so
the run stores a trace's as soon as the chunk that answers its last rollout commits (spread over the worker
processes with the chunks), and when it ends only the traces no chunk stored (``store_missing``)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Collection

from django.db import transaction
from django.utils import timezone

from anchors.core.intervals import step_intervals
from anchors.core.measures import MEASURES, step_measures
from anchors.core.measures import Rollout as CoreRollout
from anchors.core.similarity import SIMILARITY_THRESHOLD, similarities
from anchors.models import ImportanceRun, Rollout, Status, StepImportance
from anchors.planning import measured_steps
from annotation.models import Step
from reasonlib.answers import normalize_answer

DEFAULT_BOOTSTRAP = 200


def _answer(text: str) -> str:
    return normalize_answer(text) if text.strip() else ""


def complete_traces(record: ImportanceRun, traces: Collection[int]) -> set[int]:
    """Those of ``traces`` none of whose rollouts in ``record`` is still pending."""
    pending = set(Rollout.objects.filter(irun=record, trace_id__in=traces, status=Status.PENDING)
                  .values_list("trace_id", flat=True).distinct())
    return set(traces) - pending


def store_missing(record: ImportanceRun) -> int:
    """The measures of the traces with answered rollouts but no stored measure (two chunks that finished
    one trace at the same time each saw the other's rollouts pending, or a trace with no measurable step)."""
    answered = set(Rollout.objects.filter(irun=record, status=Status.OK).values_list("trace_id", flat=True).distinct())
    stored = set(StepImportance.objects.filter(irun=record).values_list("trace_id", flat=True).distinct())
    return store(record, answered - stored) if answered - stored else 0


@transaction.atomic
def store(record: ImportanceRun, traces: Collection[int] | None = None) -> int:
    """(Re)compute every measured step of ``record`` (of ``traces`` only, when given) from its rollouts;
    returns the rows written."""
    p = record.params
    threshold = float(p.get("threshold", SIMILARITY_THRESHOLD))
    resamples = int(p.get("bootstrap", DEFAULT_BOOTSTRAP))
    seed = int(p.get("seed") or 0)
    groups: dict[tuple[int, int, str], list[Rollout]] = defaultdict(list)
    answered = Rollout.objects.filter(irun=record, status=Status.OK)
    old = StepImportance.objects.filter(irun=record)
    if traces is not None:
        answered, old = answered.filter(trace_id__in=traces), old.filter(trace_id__in=traces)
    for r in answered.only("trace_id", "position", "kind", "first_sentence", "answer", "correct"):
        groups[(r.trace_id, r.position, r.kind)].append(r)
    traces = sorted({t for t, _p, _k in groups})
    steps: dict[int, list[Step]] = defaultdict(list)
    for s in Step.objects.filter(trace_id__in=traces, channel=Step.Channel.THOUGHT).order_by("trace_id", "index"):
        steps[s.trace_id].append(s)
    old.delete()
    rows = []
    now = timezone.now()
    for trace in traces:
        thought = steps.get(trace, [])
        for i in measured_steps(len(thought), stride=int(p.get("stride") or 1), steps=p.get("steps")):
            original = thought[i - 1].text
            raw_before = groups.get((trace, i - 1, Rollout.Kind.RESAMPLE), [])
            sims = similarities(original, [r.first_sentence for r in raw_before])
            before = [CoreRollout(_answer(r.answer), r.correct, s) for r, s in zip(raw_before, sims, strict=True)]
            after = [CoreRollout(_answer(r.answer), r.correct) for r in groups.get((trace, i, Rollout.Kind.RESAMPLE), [])]
            fb = [CoreRollout(_answer(r.answer), r.correct) for r in groups.get((trace, i - 1, Rollout.Kind.FORCED), [])]
            fa = [CoreRollout(_answer(r.answer), r.correct) for r in groups.get((trace, i, Rollout.Kind.FORCED), [])]
            if not before and not after:
                continue
            m = step_measures(i, before, after, forced_before=fb, forced_after=fa, threshold=threshold)
            iv = step_intervals(i, before, after, forced_before=fb, forced_after=fa, n_resamples=resamples,
                                seed=seed, threshold=threshold)
            rows.append(StepImportance(step=thought[i - 1], trace_id=trace, source=StepImportance.Source.RUN,
                                       irun=record, n=m.n, intervals={k: v for k, v in iv.items() if v is not None},
                                       computed_at=now, **{k: m.values[k] for k in MEASURES}))
    StepImportance.objects.bulk_create(rows, batch_size=1000)
    return len(rows)
