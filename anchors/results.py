"""The measures of a step-importance run from its stored rollouts (anchors.core), written as StepImportance
rows of source "run". Recomputable at any time from the rollouts (``store``); the run calls it when it ends."""

from __future__ import annotations

from collections import defaultdict

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


@transaction.atomic
def store(record: ImportanceRun) -> int:
    """(Re)compute every measured step of ``record`` from its rollouts; returns the rows written."""
    p = record.params
    threshold = float(p.get("threshold", SIMILARITY_THRESHOLD))
    resamples = int(p.get("bootstrap", DEFAULT_BOOTSTRAP))
    seed = int(p.get("seed") or 0)
    groups: dict[tuple[int, int, str], list[Rollout]] = defaultdict(list)
    for r in Rollout.objects.filter(irun=record, status=Status.OK).only(
            "trace_id", "position", "kind", "first_sentence", "answer", "correct"):
        groups[(r.trace_id, r.position, r.kind)].append(r)
    traces = sorted({t for t, _p, _k in groups})
    steps: dict[int, list[Step]] = defaultdict(list)
    for s in Step.objects.filter(trace_id__in=traces, channel=Step.Channel.THOUGHT).order_by("trace_id", "index"):
        steps[s.trace_id].append(s)
    StepImportance.objects.filter(irun=record).delete()
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
