"""ProcessBench F1 by ProcessBench's own definition (issue 23 item 4b): on
its GSM8K split (400 solutions, 207 with an error) every item counts, the
prediction being the candidate's earliest invalid step or none; the result
equals ProcessBench's formula (``code/run_eval.py``) computed here
independently from the file."""

from __future__ import annotations

import json

import pytest

from agreement import services as svc
from annotation.models import Trace
from tests.agreement.conftest import judge_labels
from tests.data_paths import PROCESSBENCH_GSM8K

pytestmark = pytest.mark.django_db


def _items() -> list[dict]:
    return json.loads(PROCESSBENCH_GSM8K.read_text(encoding="utf-8"))


def _prediction(k: int, item: dict) -> int:
    """A fixed, varied critic: right, "no error", one step late or step 0."""
    label, n = item["label"], len(item["steps"])
    return [label, -1, min(label + 1, n - 1), 0, label][k % 5]


def _processbench_f1(items: list[dict], predictions: list[int]) -> tuple[float, float, float]:
    # run_eval.py: match = prediction == label; accuracies over label != -1
    # and label == -1 items; F1 their harmonic mean.
    err = [p == it["label"] for it, p in zip(items, predictions, strict=True) if it["label"] != -1]
    cor = [p == it["label"] for it, p in zip(items, predictions, strict=True) if it["label"] == -1]
    acc_err, acc_cor = sum(err) / len(err), sum(cor) / len(cor)
    return acc_err, acc_cor, 2 * acc_err * acc_cor / (acc_err + acc_cor)


def test_processbench_f1_on_its_gsm8k_split_counts_every_item(study, do_import):
    items = _items()
    assert len(items) == 400 and sum(it["label"] != -1 for it in items) == 207
    report = do_import(PROCESSBENCH_GSM8K.read_bytes(), "processbench")
    assert report.rejected == [] and Trace.objects.filter(study=study).count() == 400
    predictions = [_prediction(k, it) for k, it in enumerate(items)]
    words = {}
    for it, p in zip(items, predictions, strict=True):
        n = len(it["steps"])
        words[f"processbench/{it['id']}"] = "".join("E" if i == p else "V" for i in range(n))
    judge_labels(study, "critic", words)
    m = svc.agreement(study, "annotator:processbench-reference", "judge:critic", n_resamples=50)
    acc_err, acc_cor, f1 = _processbench_f1(items, predictions)
    # The reference labels stop at the earliest error, yet every item counts.
    assert (m["traces_compared"], m["pb_error_traces"], m["pb_correct_traces"]) == (400, 207, 193)
    assert m["pb_error_acc"] == pytest.approx(acc_err)
    assert m["pb_correct_acc"] == pytest.approx(acc_cor)
    assert m["pb_f1"] == pytest.approx(f1)
    assert 0.2 < f1 < 0.8  # a varied critic, not a degenerate 0 or 1


def test_a_first_error_the_labels_do_not_determine_is_left_out():
    import pandas as pd

    from agreement.core.pairs import first_error_determined

    scores = pd.DataFrame({"trace_id": ["a", "b", "c", "d"], "n_steps": [3, 3, 3, 3]})
    labels = pd.DataFrame({"trace_id": ["a", "a", "b", "c", "c", "c", "d"],
                           "step": [1, 2, 2, 1, 2, 3, 3],
                           "verdict": ["valid", "invalid", "invalid", "valid", "valid", "valid", "valid"]})
    out = first_error_determined(scores, labels, "labels")
    # a: error at 2, steps 1-2 labelled; b: step 1 unknown before the error;
    # c: every step valid; d: steps 1-2 unknown.
    assert out["complete"].tolist() == [True, False, True, False]
    assert out["first_error"].fillna(0).tolist() == [2, 2, 0, 0]


def test_the_calibration_page_shows_the_published_f1_beside_the_studys_judges(study, do_import, owner):
    from django.test import Client
    from django.urls import reverse

    from agreement import calibration

    every = _items()
    items = [it for it in every if it["label"] != -1][:20] + [it for it in every if it["label"] == -1][:20]
    do_import(json.dumps(items).encode(), "processbench")
    predictions = [_prediction(k, it) for k, it in enumerate(items)]
    judge_labels(study, "critic", {f"processbench/{it['id']}": "".join("E" if i == p else "V"
                                                                      for i in range(len(it["steps"])))
                                   for it, p in zip(items, predictions, strict=True)})
    cal = calibration.do_create_calibration(study, name="pb", reference="annotator:processbench-reference",
                                            candidates=["judge:critic"], size=40)
    f1 = _processbench_f1(items, predictions)[2]
    client = Client()
    client.force_login(owner)
    body = client.get(reverse("scoring-calibration", args=[study.pk, cal.pk])).content.decode()
    section = body[body.index('id="processbench"'):]
    section = section[:section.index("</section>")]
    assert "<strong>judge:critic</strong>" in section and f"{100 * f1:.1f}" in section
    assert "o1-mini" in section and "93.2" in section and "GPT-4o-0806" in section and "79.2" in section
    assert section.index("judge:critic") < section.index("o1-mini") < section.index("GPT-4o-0806")


# ---------------------------------------------------------------------------
# Several splits (issue 30 item 4): the paper's "Average" is the unweighted mean of the split F1s.

def _math_items() -> list[dict]:
    from tests.data_paths import PROCESSBENCH_MATH_HEAD

    return json.loads(PROCESSBENCH_MATH_HEAD.read_text(encoding="utf-8"))


def _two_splits(study, do_import) -> tuple[list[dict], list[dict], list[int], list[int]]:
    every = _items()
    gsm8k = [it for it in every if it["label"] != -1][:30] + [it for it in every if it["label"] == -1][:30]
    math = _math_items()
    do_import(json.dumps(gsm8k + math).encode(), "processbench")
    p_gsm8k = [_prediction(k, it) for k, it in enumerate(gsm8k)]
    p_math = [_prediction(k, it) for k, it in enumerate(math)]  # F1 0.545 here, 0.480 on GSM8K
    judge_labels(study, "critic", {f"processbench/{it['id']}": "".join("E" if i == p else "V"
                                                                      for i in range(len(it["steps"])))
                                   for it, p in zip(gsm8k + math, p_gsm8k + p_math, strict=True)})
    return gsm8k, math, p_gsm8k, p_math


def test_split_of_reads_processbench_item_ids():
    from agreement.core.processbench import split_of

    assert [split_of(t) for t in ("processbench/gsm8k-0", "processbench/math-524", "processbench/omnimath-3",
                                  "olympiadbench-12", "processbench/aime-1", "gsm8k/7", "math-x")] == [
        "gsm8k", "math", "omnimath", "olympiadbench", None, None, None]


def test_split_metrics_average_is_the_unweighted_mean_of_the_split_f1s():
    import pandas as pd

    from agreement.core.processbench import split_metrics

    # gsm8k: 2 error traces (1 found), 2 correct (2 kept): F1 = 2*0.5*1/1.5 = 2/3.
    # math: 1 error trace (found), 3 correct (1 kept): F1 = 2*1*(1/3)/(4/3) = 1/2.
    pairs = pd.DataFrame({"trace_id": [1, 2, 3, 4, 5, 6, 7, 8],
                          "reference_first_error": [2, 3, 0, 0, 1, 0, 0, 0],
                          "candidate_first_error": [2, 1, 0, 0, 1, 2, 0, 3]})
    splits = pd.DataFrame({"trace_id": [1, 2, 3, 4, 5, 6, 7, 8],
                           "split": ["gsm8k"] * 4 + ["math"] * 4})
    out = split_metrics(pairs, splits)
    assert out["pb_splits"]["gsm8k"]["pb_f1"] == pytest.approx(2 / 3)
    assert out["pb_splits"]["math"]["pb_f1"] == pytest.approx(1 / 2)
    # Not the pooled F1 (errors 2/3, correct 3/5 -> 0.632) nor a size-weighted mean: the paper's Average.
    assert out["pb_average_f1"] == pytest.approx((2 / 3 + 1 / 2) / 2)
    one = split_metrics(pairs.iloc[:4], splits)
    assert list(one["pb_splits"]) == ["gsm8k"] and "pb_average_f1" not in one
    # A split whose F1 is undefined (no correct trace) leaves the Average undefined, with the reason.
    undefined = split_metrics(pairs.iloc[:5], splits)
    assert undefined["pb_average_f1"] is None and "MATH" in undefined["undefined"]["pb_average_f1"]
    assert split_metrics(pairs, splits.iloc[:0]) == {}


def test_a_study_with_two_splits_shows_the_papers_average(study, do_import, owner):
    from django.test import Client
    from django.urls import reverse

    gsm8k, math, p_gsm8k, p_math = _two_splits(study, do_import)
    m = svc.agreement(study, "annotator:processbench-reference", "judge:critic", n_resamples=20)
    f1_gsm8k = _processbench_f1(gsm8k, p_gsm8k)[2]
    f1_math = _processbench_f1(math, p_math)[2]
    assert list(m["pb_splits"]) == ["gsm8k", "math"]
    assert m["pb_splits"]["gsm8k"]["traces_compared"] == 60 and m["pb_splits"]["math"]["traces_compared"] == 40
    assert m["pb_splits"]["gsm8k"]["pb_f1"] == pytest.approx(f1_gsm8k)
    assert m["pb_splits"]["math"]["pb_f1"] == pytest.approx(f1_math)
    assert m["pb_average_f1"] == pytest.approx((f1_gsm8k + f1_math) / 2)
    assert m["pb_average_f1"] != pytest.approx(m["pb_f1"])  # the pooled F1 is another number

    client = Client()
    client.force_login(owner)
    body = client.get(reverse("scoring-agreement", args=[study.pk]),
                      {"reference": "annotator:processbench-reference", "candidate": "judge:critic"}).content.decode()
    assert "ProcessBench Average F1 (mean of the 2 split F1s)" in body
    assert "ProcessBench F1, MATH split" in body
    average = body[body.index("ProcessBench Average F1"):]
    assert f"{(f1_gsm8k + f1_math) / 2:.3f}" in average[:600]


def test_a_study_with_one_split_has_no_average(study, do_import):
    do_import(json.dumps(_math_items()).encode(), "processbench")
    judge_labels(study, "critic", {f"processbench/{it['id']}": "V" * len(it["steps"]) for it in _math_items()})
    m = svc.agreement(study, "annotator:processbench-reference", "judge:critic", n_resamples=20)
    assert list(m["pb_splits"]) == ["math"] and "pb_average_f1" not in m


def test_the_calibration_page_lists_the_papers_numbers_per_split(study, do_import, owner):
    from django.test import Client
    from django.urls import reverse

    from agreement import calibration

    gsm8k, math, p_gsm8k, p_math = _two_splits(study, do_import)
    cal = calibration.do_create_calibration(study, name="pb2", reference="annotator:processbench-reference",
                                            candidates=["judge:critic"], size=100)
    client = Client()
    client.force_login(owner)
    body = client.get(reverse("scoring-calibration", args=[study.pk, cal.pk])).content.decode()
    assert "ProcessBench Average F1 (mean of the 2 split F1s)" in body  # the metrics table, too
    section = body[body.index('id="processbench"'):]
    section = section[:section.index("</section>")]
    assert "Table 3" in section and "MATH F1" in section and "Average F1" in section
    # o1-mini's row: GSM8K 93.2, MATH 88.9, OlympiadBench 87.2, Omni-MATH 82.4, Average 87.9 (paper, Tables 3 and 5).
    row = section[section.index("o1-mini"):]
    row = row[:row.index("</tr>")]
    assert [c for c in ("93.2", "88.9", "87.2", "82.4", "87.9") if c not in row] == []
    ours = section[section.index("<strong>judge:critic</strong>"):]
    ours = ours[:ours.index("</tr>")]
    f1_gsm8k, f1_math = _processbench_f1(gsm8k, p_gsm8k)[2], _processbench_f1(math, p_math)[2]
    for value in (f1_gsm8k, f1_math, (f1_gsm8k + f1_math) / 2):
        assert f"{100 * value:.1f}" in ours
@pytest.mark.parametrize("fmt", ["jsonl", "parquet"])
def test_the_trace_exports_give_the_reference_first_error_of_every_erroneous_item(study, do_import, tmp_path, fmt):
    """The reference labels stop at the earliest error, so only the 16 items whose error is the last step have
    every step labelled (and scores); the agreement metrics still count all 207 erroneous items, and the
    agreement-traces and scores exports give the same first error for each of them (16 before the fix)."""
    import io

    import pandas as pd
    from django.core.management import call_command

    from scoring import score_jobs

    items = _items()
    assert do_import(PROCESSBENCH_GSM8K.read_bytes(), "processbench").committed
    score_jobs.recompute(study, warm=False)
    expected = {f"processbench/{it['id']}": it["label"] + 1 for it in items if it["label"] != -1}
    assert len(expected) == 207

    def export(what: str, **opts) -> pd.DataFrame:
        out = tmp_path / f"{what}.{fmt}"
        call_command("export", study=study.name, what=what, format=fmt, out=str(out), stderr=io.StringIO(), **opts)
        return pd.read_parquet(out) if fmt == "parquet" else pd.read_json(out, lines=True)

    source = "annotator:processbench-reference"
    traces = export("agreement-traces")
    got = {t: int(fe) for t, fe in zip(traces["trace_id"], traces["human.first_error"], strict=True) if pd.notna(fe)}
    assert got == expected  # the items without an error have none
    assert int(traces["human.complete"].sum()) == 193 + 16  # scores (complete labels) only where every step is
    scores = export("scores", source="human")
    got = {t: int(fe) for t, fe in zip(scores["trace_id"], scores["first_error"], strict=True) if pd.notna(fe)}
    assert got == expected and len(scores) == 400
    unscored = scores.loc[scores["process"].isna()]
    assert len(unscored) == 207 - 16 and unscored["first_error"].notna().all()
    assert svc.agreement(study, source, source, n_resamples=10)["pb_error_traces"] == 207
