"""Reading a subject model's traces with what the interventions and the anytime
profile need: the text the step spans point into, the steps, the gold answer,
the skeleton checks, the regime and the reported token count."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from django.db.models import QuerySet

from annotation.models import SkeletonStep, Step, Trace
from faithfulness.core import edits as edit_core
from reasonlib import segmentation
from subjects.models import Generation, SubjectModel


@dataclass
class TraceData:
    pk: int
    trace_id: str
    raw: str  # the text the step spans point into
    spans: list[tuple[int, int]]
    steps: list[str]
    answer: str
    correct: bool | None
    gold: str
    problem_id: str
    statement: str
    skeleton_checks: list[str | None]
    skeleton_len: int
    regime: dict[str, Any]
    tokens: int | None  # completion tokens the server reported
    truncated: bool


def subject_traces(subject: SubjectModel) -> QuerySet[Trace]:
    """The subject model's generated traces of its current configuration version, of the study's own
    problems (every faithfulness and step-importance run starts here; not suite variants' traces)."""
    ids = Generation.objects.filter(subject=subject, config_version=subject.version).values("trace_id")
    return Trace.objects.of_study(subject.study_id).filter(pk__in=ids)


ANSWER, THOUGHT = Step.Channel.ANSWER, Step.Channel.THOUGHT
CHANNELS = (THOUGHT, ANSWER)


def load_traces(traces: QuerySet[Trace] | Iterable[int], *, with_generation: bool = True,
                channel: str = ANSWER) -> list[TraceData]:
    """Traces with the steps of one channel, gold answer and skeleton checks (a handful of queries, any
    size). For ``channel="thought"`` the text is the thought (``Trace.thought``) and the steps are the
    thought steps; a thought stored before it was segmented is split into paragraphs here."""
    if channel not in CHANNELS:
        raise ValueError(f"channel {channel!r}: choose thought or answer")
    qs = traces if isinstance(traces, QuerySet) else Trace.objects.filter(pk__in=list(traces))
    text_field = "thought" if channel == THOUGHT else "raw"
    rows = list(qs.order_by("pk").values_list(
        "pk", "trace_id", text_field, "answer", "answer_correct", "problem__gold_answer", "problem__problem_id",
        "problem__statement", "problem__approved_skeleton_id", "regime", "meta", "thought_truncated"))
    pks = [r[0] for r in rows]
    steps: dict[int, list[tuple[str, int | None, int | None]]] = defaultdict(list)
    for trace, text, start, end in Step.objects.filter(trace_id__in=pks, channel=channel).order_by(
            "trace_id", "index").values_list("trace_id", "text", "start", "end"):
        steps[trace].append((text, start, end))
    if channel == THOUGHT:
        for pk, _tid, thought, *_rest in rows:  # noqa: B007
            if thought and pk not in steps:
                steps[pk] = [(seg.text, seg.start, seg.end) for seg in segmentation.segment(thought, "paragraphs")]
    skeletons = {r[8] for r in rows if r[8]}
    checks: dict[int, list[str | None]] = defaultdict(list)
    for sk, check in SkeletonStep.objects.filter(skeleton_id__in=skeletons).order_by("skeleton_id", "position") \
            .values_list("skeleton_id", "check_expr"):
        checks[sk].append(check or None)
    tokens: dict[int, tuple[int | None, bool]] = {}
    if with_generation:
        tokens = {t: (n, tr) for t, n, tr in Generation.objects.filter(trace_id__in=pks).values_list(
            "trace_id", "completion_tokens", "truncated")}
    out = []
    for pk, tid, raw, answer, correct, gold, pid, statement, sk, regime, meta, thought_truncated in rows:
        text, spans = edit_core.step_spans(raw, steps.get(pk, []))
        n_tokens, truncated = tokens.get(pk, (None, bool((meta or {}).get("truncated"))))
        if channel == THOUGHT:
            # A thought's length is its own: the reported completion tokens count the answer too.
            n_tokens = (regime or {}).get("thought_tokens") if isinstance((regime or {}).get("thought_tokens"),
                                                                          int) else None
            # [I] A truncated trace whose answer channel is empty was cut inside its thought.
            truncated = bool(thought_truncated) or (truncated and not (answer or "").strip())
        out.append(TraceData(pk, tid, text, spans, [s[0] for s in steps.get(pk, [])], answer or "", correct,
                             gold or "", pid, statement, checks.get(sk, []) if sk else [],
                             len(checks.get(sk, [])) if sk else 0, regime or {}, n_tokens, truncated))
    return out


