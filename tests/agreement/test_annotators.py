"""Agreement among annotators through the service: the hand-computed example
of docs/agreement.md §12 (three annotators, four steps), per domain,
overlap sets, and each annotator against the others (leave-one-out) or the
adjudication."""

from __future__ import annotations

import json

import pytest

from agreement import services as svc
from annotation.models import Step, StepLabel
from tests.agreement.conftest import labels_of, problem, trace
from tests.conftest import jsonl

pytestmark = pytest.mark.django_db

# steps:   1  2  3  4
# ann_a    V  V  E  N
# ann_b    V  V  E  V
# ann_c    V  E  E  N
WORDS = {"ann_a": "VVEN", "ann_b": "VVEV", "ann_c": "VEEN"}


@pytest.fixture
def three(study, do_import):
    labels = [lab for name, word in WORDS.items() for lab in labels_of(name, word)]
    other = labels_of("ann_a", "VV") + labels_of("ann_b", "VE")
    report = do_import(jsonl(problem("p1", "arith"), problem("p2", "alg"), trace("t1", "p1", "m1", 4, labels=labels),
                             trace("t2", "p2", "m1", 2, labels=other)))
    assert report.committed, report.rejected
    return study


def test_the_hand_computed_inter_annotator_figures(three):
    r = svc.annotator_report(three)
    arith = next(d for d in r["by_domain"] if d["domain"] == "arith")
    assert arith["annotators"] == 3 and arith["items_paired"] == 4 and arith["ratings_per_item"] == 3
    assert arith["fleiss_kappa"] == pytest.approx(5 / 11)  # P-bar 2/3, P_e 7/18
    assert arith["krippendorff_alpha"] == pytest.approx(0.5)  # 1 - 11 * 4 / (144 - 56)
    names = arith["pairwise_kappa"]["annotators"]
    kappa = {(names[i], names[j]): arith["pairwise_kappa"]["kappa"][i][j] for i in range(3) for j in range(3)}
    assert kappa[("ann_a", "ann_b")] == pytest.approx(5 / 9)
    assert kappa[("ann_a", "ann_c")] == pytest.approx(7 / 11)
    assert kappa[("ann_b", "ann_c")] == pytest.approx(3 / 11)
    # the whole study adds t2, where only two annotators rated: Fleiss needs equal counts
    assert r["overall"]["fleiss_kappa"] is None
    assert "different numbers of ratings (2 to 3)" in r["overall"]["undefined"]["fleiss_kappa"]
    alg = next(d for d in r["by_domain"] if d["domain"] == "alg")
    assert alg["annotators"] == 2 and alg["krippendorff_alpha"] is not None


def test_overlap_sets(three):
    r = svc.annotator_report(three)
    json.dumps(r, allow_nan=False)  # JSON-ready: cached, served by the API
    assert r["overlap"] == [
        {"annotators": ["ann_a", "ann_b"], "size": 2, "traces": 1, "steps": 2},
        {"annotators": ["ann_a", "ann_b", "ann_c"], "size": 3, "traces": 1, "steps": 4},
    ]


def test_each_annotator_is_measured_against_the_others_not_themselves(three):
    rows = {r["annotator"]: r for r in svc.annotator_report(three)["annotators"]}
    a = rows["ann_a"]
    # t1: b+c consensus V, (V,E)->E (ties go to invalid), E, (V,N)->N; a says V V E N: 3 of 4
    # t2: b alone says V E; a says V V: 1 of 2
    assert a["steps_compared"] == 6
    assert a["percent_agreement"] == pytest.approx(4 / 6)
    assert a["traces"] == 2 and a["steps_labelled"] == 6
    # "who needs calibration": lowest kappa first
    kappas = [r["kappa"] for r in svc.annotator_report(three)["annotators"]]
    assert kappas == sorted(kappas)


def test_an_adjudication_is_the_reference_where_it_exists(three, owner):
    step = Step.objects.get(trace__trace_id="t1", index=2)
    StepLabel.objects.create(step=step, kind=StepLabel.Kind.ADJUDICATION, annotator=owner, verdict="valid")
    rows = {r["annotator"]: r for r in svc.annotator_report(three)["annotators"]}
    # step 2 is now V for everyone: a agrees there (4 of 6 + 1), c does not
    assert rows["ann_a"]["percent_agreement"] == pytest.approx(5 / 6)
    assert rows["ann_c"]["confusion"]["valid"]["invalid"] == 1
