"""Agreement test data, built through the real import (human labels are the
``labels`` of trace records, complete reviews) and judge labels written as
StepLabel rows, with hand-computed expectations in the tests.

The worked example of docs/agreement.md §12: two traces of five steps.

    pair        1  2  3  4  5 |  6  7  8  9 10
    trace        ---- tA ---- |  ---- tB ----
    reference   V  V  V  V  V |  E  E  E  N  N    (annotator ann1)
    candidate   V  V  V  V  E |  E  E  V  N  V    (judge gpt)

with judge confidences 0.95 (tA1, right), 0.91 (tA5, wrong), 0.55 (tB1,
right), 0.52 (tB4, right), 0.05 (tB5, wrong).
"""

from __future__ import annotations

import pytest

from annotation.models import Step, StepLabel, Study, TraceReview
from judges.models import JudgeConfig
from scoring import score_jobs
from tests.conftest import jsonl

V, E, N = "valid", "invalid", "neutral"
WORD = {"V": V, "E": E, "N": N}

REFERENCE = {"tA": "VVVVV", "tB": "EEENN"}
CANDIDATE = {"tA": "VVVVE", "tB": "EEVNV"}
CONFIDENCE = {("tA", 1): 0.95, ("tA", 5): 0.91, ("tB", 1): 0.55, ("tB", 4): 0.52, ("tB", 5): 0.05}

INTERFACE_FIELDS = ["steps_compared", "percent_agreement", "kappa", "kappa_binary", "confusion", "traces_compared",
                    "first_error_exact", "first_error_within_1", "pb_error_acc", "pb_correct_acc", "pb_f1",
                    "pearson_r", "pearson_ci", "spearman_rho", "spearman_ci"]


def labels_of(annotator: str, word: str, refs: dict[int, list[int]] | None = None) -> list[dict]:
    return [{"step": i + 1, "verdict": WORD[c], "annotator": annotator, "skeleton_refs": (refs or {}).get(i + 1, [])}
            for i, c in enumerate(word)]


def problem(pid: str, domain: str = "arith", skeleton: bool = False) -> dict:
    rec = {"kind": "problem", "problem_id": pid, "statement": f"What is {pid}?", "gold_answer": "1", "domain": domain}
    if skeleton:
        rec["skeleton"] = [{"text": "first"}, {"text": "second"}]
    return rec


def trace(tid: str, pid: str, model: str, n: int, correct: bool = True, labels=(), rating=None) -> dict:
    rec = {"kind": "trace", "problem_id": pid, "model": model, "trace_id": tid,
           "steps": [f"{tid} step {i + 1}: x = {i}" for i in range(n)], "answer": "1", "answer_correct": correct,
           "labels": list(labels)}
    if rating is not None:
        rec["rating"] = rating
    return rec


def judge_labels(study: Study, name: str, words: dict[str, str], confidence: dict | None = None,
                 primary: bool = False, reasons: dict | None = None) -> JudgeConfig:
    judge, _ = JudgeConfig.objects.get_or_create(study=study, name=name, defaults={"provider": "fake"})
    if primary:
        Study.objects.filter(pk=study.pk).update(primary_judge=judge)
        study.primary_judge = judge
    steps = {(s.trace.trace_id, s.index): s for s in Step.objects.filter(trace__study=study).select_related("trace")}
    StepLabel.objects.bulk_create([
        StepLabel(step=steps[(tid, i + 1)], kind=StepLabel.Kind.JUDGE, judge=judge, verdict=WORD[c],
                  confidence=(confidence or {}).get((tid, i + 1)), reason=(reasons or {}).get((tid, i + 1), ""))
        for tid, word in words.items() for i, c in enumerate(word)
    ])
    return judge


@pytest.fixture
def worked(study, do_import):
    """The worked example, scored (stored TraceScores)."""
    report = do_import(jsonl(problem("p1"), trace("tA", "p1", "m1", 5, labels=labels_of("ann1", REFERENCE["tA"])),
                             trace("tB", "p1", "m2", 5, correct=False, labels=labels_of("ann1", REFERENCE["tB"]))))
    assert report.committed, report.rejected
    judge_labels(study, "gpt", CANDIDATE, CONFIDENCE)
    assert TraceReview.objects.filter(trace__study=study, complete=True).count() == 2
    score_jobs.recompute(study, warm=False)
    return study


# The score example: four traces of two steps, no skeleton (L = 0), so under
# the profile no-hazard (omega = 0) P = S_PRM = 10 * (steps not invalid) / 2.
#   trace   reference  P  | candidate  P
#   c1      V V       10  | V V       10
#   c2      V E        5  | V V       10
#   c3      E E        0  | E E        0
#   c4      V V       10  | V E        5
# Pearson r = 43.75 / 68.75 = 7/11; Spearman rho (average ranks) = 2.25 / 4.5 = 0.5.
SCORE_REFERENCE = {"c1": "VV", "c2": "VE", "c3": "EE", "c4": "VV"}
SCORE_CANDIDATE = {"c1": "VV", "c2": "VV", "c3": "EE", "c4": "VE"}


@pytest.fixture
def scored_pairs(study, do_import):
    records = [problem("q1")]
    for i, tid in enumerate(SCORE_REFERENCE):
        records.append(trace(tid, "q1", f"m{i % 2}", 2, correct=i % 2 == 0,
                             labels=labels_of("ann1", SCORE_REFERENCE[tid]), rating=[9, 4, 1, 6][i]))
    report = do_import(jsonl(*records))
    assert report.committed, report.rejected
    judge_labels(study, "gpt", SCORE_CANDIDATE)
    score_jobs.recompute(study, warm=False)
    return study
