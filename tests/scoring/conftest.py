"""Test data for the scoring app: a small study with human labels (complete
and partial reviews), a judge and an adjudication, built through the real
import and the ORM."""

from __future__ import annotations

import pytest

from annotation.models import Step, StepLabel, TraceReview
from judges.models import JudgeConfig
from tests.conftest import jsonl

PROBLEMS = [
    {"kind": "problem", "problem_id": "p1", "statement": "2+3?", "gold_answer": "5", "domain": "arith",
     "skeleton": [{"text": "2+3=5"}, {"text": "answer 5"}]},
    {"kind": "problem", "problem_id": "p2", "statement": "4*2?", "gold_answer": "8", "domain": "alg"},
]


def _labels(annotator: str, verdicts: list[str], refs: list[list[int]] | None = None) -> list[dict]:
    return [{"step": i + 1, "verdict": v, "annotator": annotator, "skeleton_refs": (refs or [[]] * len(verdicts))[i]}
            for i, v in enumerate(verdicts)]


def records() -> bytes:
    traces = [
        # m1: complete reviews by two annotators; they disagree on step 2 (tie -> invalid)
        {"kind": "trace", "problem_id": "p1", "model": "m1", "trace_id": "t1", "steps": ["2+3=5", "so 5", "A: 5"],
         "answer": "5", "answer_correct": True,
         "labels": _labels("ann1", ["valid", "valid", "valid"], [[1], [2], []])
         + _labels("ann2", ["valid", "invalid", "valid"], [[1], [], []])},
        # m1: only a partial review (ann1 labelled 1 of 2 steps) -> no human score
        {"kind": "trace", "problem_id": "p2", "model": "m1", "trace_id": "t2", "steps": ["4*2=9", "A: 9"],
         "answer": "9", "answer_correct": False, "labels": _labels("ann1", ["invalid"])},
        # m2: complete review, error at step 1, correct answer -> lucky guess
        {"kind": "trace", "problem_id": "p1", "model": "m2", "trace_id": "t3", "steps": ["2+3=6", "A: 5"],
         "answer": "5", "answer_correct": True, "labels": _labels("ann1", ["invalid", "valid"])},
        # m2: no labels at all
        {"kind": "trace", "problem_id": "p2", "model": "m2", "trace_id": "t4", "steps": ["4*2=8", "A: 8"],
         "answer": "8", "answer_correct": True},
        # m3: an empty trace (no steps): scored under every source
        {"kind": "trace", "problem_id": "p2", "model": "m3", "trace_id": "t5", "steps": [], "answer": "8",
         "answer_correct": True},
    ]
    return jsonl(*PROBLEMS, *traces)


def add_judge_labels(study, name: str, verdicts: dict[str, list[str]]) -> JudgeConfig:
    judge, _ = JudgeConfig.objects.get_or_create(study=study, name=name, defaults={"provider": "fake"})
    steps = {(s.trace.trace_id, s.index): s for s in Step.objects.filter(trace__study=study).select_related("trace")}
    StepLabel.objects.bulk_create([
        StepLabel(step=steps[(tid, i + 1)], kind=StepLabel.Kind.JUDGE, judge=judge, verdict=v)
        for tid, vs in verdicts.items() for i, v in enumerate(vs)
    ])
    return judge


def adjudicate(study, user, trace_id: str, step: int, verdict: str, refs=()) -> None:
    s = Step.objects.get(trace__study=study, trace__trace_id=trace_id, index=step)
    StepLabel.objects.create(step=s, kind=StepLabel.Kind.ADJUDICATION, annotator=user, verdict=verdict,
                             skeleton_refs=list(refs))


@pytest.fixture
def seeded(study, do_import):
    report = do_import(records())
    assert report.committed, report.rejected
    assert TraceReview.objects.filter(trace__study=study, complete=True).count() == 3
    return study
