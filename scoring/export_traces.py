"""``export --what traces``: a study in the canonical import format (docs/import-format.md), so that it
round-trips -- export, import into a new study, export again gives the same file (docs/exports.md).

Every line is one import record: first the problems (by ``problem_id``), then the traces (by
``trace_id``). Only what an import can take back is written, and written so that the import rebuilds
it unchanged: the steps of both channels as given lists (the study's segmenters do not re-cut them),
the answer as stored, ``answer_correct`` only when it did not come from the automatic check (which
the import re-runs), the trace's ``meta`` without the parser's ``meta["thought"]`` (the import derives
it again), human labels with their annotators and the rating of their review.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from annotation.models import Problem, Skeleton, Step, StepLabel, Trace, TraceReview
from reasonlib import thinking
from scoring.exports import ExportRequest, Table, register

#: Traces read (with their steps, labels and reviews) per round of queries: flat memory on any study.
CHUNK = 500
LINE_COLUMNS = ["kind", "problem_id", "trace_id", "record"]
LINE_SCHEMA = {"kind": "string", "problem_id": "string", "trace_id": "string", "record": "json"}


def _skeleton(problem: Problem, skeletons: dict[int, list[Skeleton]]) -> tuple[list[dict[str, str]] | None, str]:
    """The skeleton an import takes (one version): the approved one, else the newest draft."""
    versions = skeletons.get(problem.pk, [])
    chosen = next((s for s in versions if s.pk == problem.approved_skeleton_id), None)
    status = "approved"
    if chosen is None:
        drafts = [s for s in versions if s.status != Skeleton.Status.APPROVED]
        if not drafts:
            return None, status
        chosen, status = max(drafts, key=lambda s: s.version), "draft"
    steps = []
    for st in sorted(chosen.steps.all(), key=lambda s: s.position):
        item = {"text": st.text}
        if st.check_expr:
            item["check"] = st.check_expr
        steps.append(item)
    return steps or None, status


def problem_records(study) -> Iterator[dict[str, Any]]:
    # The study's own problems (and below its own traces): a fidelity suite's variants are made again from
    # the suite's seed, the abstraction benchmark's items come with their own import.
    problems = Problem.objects.of_study(study).order_by("problem_id")
    skeletons: dict[int, list[Skeleton]] = {}
    for s in Skeleton.objects.filter(problem__in=problems.values("pk")).prefetch_related("steps"):
        skeletons.setdefault(s.problem_id, []).append(s)
    for p in problems.iterator(chunk_size=CHUNK):
        rec: dict[str, Any] = {"kind": "problem", "problem_id": p.problem_id, "statement": p.statement,
                               "gold_answer": p.gold_answer, "domain": p.domain, "tags": list(p.tags or []),
                               "meta": dict(p.meta or {})}
        steps, status = _skeleton(p, skeletons)
        if steps is not None:
            rec["skeleton"] = steps
            rec["skeleton_status"] = status
        yield rec


def _thought_fields(trace: Trace) -> dict[str, Any]:
    """The fields that make the import find the same thought: the separate parts (a field, eval-log
    blocks) are given; parts found inline in raw are found again in raw."""
    if not trace.thought:
        return {}
    info = (trace.meta or {}).get("thought") or {}
    blocks = info.get("blocks") or []
    out: dict[str, Any] = {}
    separate = [b for b in blocks if "raw_start" not in b]
    fields = [trace.thought[b["start"]:b["end"]] for b in separate if b.get("source") == "field"]
    if fields:
        out["thought"] = "\n\n".join(fields)
    given = [b for b in separate if b.get("source") == "blocks"]
    if given:
        out["thought_blocks"] = [{"text": trace.thought[b["start"]:b["end"]], "redacted": bool(b.get("redacted")),
                                  "summary": bool(b.get("summary"))} for b in given]
    forms = info.get("forms") or [info.get("form")]
    if "unclosed" in forms:
        out["prompt_opens_thought"] = True
    # A thought the parser would not find again from these fields (a migrated trace, a think_end token
    # not kept): the stored text is given as the separate thought, unless raw holds part of it.
    split = thinking.split_thinking(
        trace.raw, reasoning_field=out.get("thought"),
        reasoning_blocks=[thinking.ReasoningBlock(b["text"], b["redacted"], b["summary"])
                          for b in out.get("thought_blocks", ())],
        opened=bool(out.get("prompt_opens_thought")),
        cut=(trace.meta or {}).get("finish_reason") == "length" or bool((trace.meta or {}).get("truncated")))
    if split.thought != trace.thought and not any("raw_start" in b for b in blocks):
        out = {"thought": trace.thought}
    return out


def _trace_records(trace: Trace, steps: list[Step], labels: list[StepLabel],
                   ratings: dict[str, float]) -> list[dict[str, Any]]:
    """The trace's line; and, since a line carries one annotator's ``rating``, one more line per other
    annotator who rated it: the same trace (the import finds it unchanged) with just that annotator's
    labels and rating, which the import applies to their review."""
    rec = _trace_record(trace, steps, labels, ratings)
    out = [rec]
    names = list(dict.fromkeys(lab["annotator"] for lab in rec.get("labels", ())))
    for name in names[1:]:
        if name in ratings:
            out.append({**rec, "labels": [lab for lab in rec["labels"] if lab["annotator"] == name],
                        "rating": ratings[name]})
    return out


def _trace_record(trace: Trace, steps: list[Step], labels: list[StepLabel], ratings: dict[str, float]) -> dict[str, Any]:
    meta = {k: v for k, v in (trace.meta or {}).items() if k != "thought"}
    rec: dict[str, Any] = {"kind": "trace", "trace_id": trace.trace_id, "problem_id": trace.problem.problem_id,
                           "model": trace.model, "raw": trace.raw}
    rec.update(_thought_fields(trace))
    thought = [s.text for s in steps if s.channel == Step.Channel.THOUGHT]
    if thought:
        rec["thought_steps"] = thought
    rec["steps"] = [s.text for s in steps if s.channel != Step.Channel.THOUGHT]
    rec["answer"] = trace.answer
    if trace.answer_origin in (Trace.AnswerOrigin.IMPORTED, Trace.AnswerOrigin.REVIEWER):
        # A reviewer's decision comes back as the file's verdict; the automatic one is re-checked.
        rec["answer_correct"] = trace.answer_correct
    rec["meta"] = meta
    rec["regime"] = dict(trace.regime or {})
    if labels:
        # The import gives "rating" to the first annotator of the list: a rated one goes first.
        names = sorted({lab.annotator.username for lab in labels}, key=lambda n: (n not in ratings, n))
        order = {n: k for k, n in enumerate(names)}
        step_index = {s.pk: s.index for s in steps}
        rec["labels"] = [
            {"step": step_index[lab.step_id], "verdict": lab.verdict, "skeleton_refs": sorted(lab.skeleton_refs or []),
             "annotator": lab.annotator.username, "note": lab.reason, "confidence": lab.confidence}
            for lab in sorted(labels, key=lambda lab: (order[lab.annotator.username], step_index[lab.step_id]))
        ]
        if names[0] in ratings:
            rec["rating"] = ratings[names[0]]
    return rec


def trace_records(study, table: Table) -> Iterator[dict[str, Any]]:
    pks = list(Trace.objects.of_study(study).order_by("trace_id").values_list("pk", flat=True))
    n_labels = 0
    for start in range(0, len(pks), CHUNK):
        chunk = pks[start:start + CHUNK]
        traces = {t.pk: t for t in Trace.objects.filter(pk__in=chunk).select_related("problem")}
        steps: dict[int, list[Step]] = {}
        for s in Step.objects.filter(trace_id__in=chunk).order_by("trace_id", "index"):
            steps.setdefault(s.trace_id, []).append(s)
        labels: dict[int, list[StepLabel]] = {}
        for lab in (StepLabel.objects.filter(step__trace_id__in=chunk, kind=StepLabel.Kind.HUMAN)
                    .select_related("annotator", "step")):
            labels.setdefault(lab.step.trace_id, []).append(lab)
        ratings: dict[int, dict[str, float]] = {}
        for tid, name, rating in (TraceReview.objects.filter(trace_id__in=chunk, rating__isnull=False)
                                  .values_list("trace_id", "annotator__username", "rating")):
            ratings.setdefault(tid, {})[name] = rating
        for pk in chunk:
            recs = _trace_records(traces[pk], steps.get(pk, []), labels.get(pk, []), ratings.get(pk, {}))
            n_labels += len(recs[0].get("labels", ()))
            yield from recs
    table.meta["counts"] = {**table.meta.get("counts", {}), "traces": len(pks), "labels": n_labels}


@register("traces", restricted=True,
          help="the study in the canonical import format: problems with skeletons, traces with both channels, "
               "human labels and ratings (import it into a new study with import_traces)")
def traces(request: ExportRequest) -> Table:
    study = request.study
    n_problems = Problem.objects.of_study(study).count()
    n_traces = Trace.objects.of_study(study).count()
    table = Table(LINE_COLUMNS, [], schema=LINE_SCHEMA, lines=True,
                  meta={"profile": None, "sources": ["human"], "counts": {"problems": n_problems},
                        "expected_rows": n_problems + n_traces, "applied": []})

    def rows() -> Iterator[dict[str, Any]]:
        yield from problem_records(study)
        yield from trace_records(study, table)

    table.rows = rows()
    return table
