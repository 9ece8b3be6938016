"""Agreement core: hand-computed examples and every degenerate case."""

import json

import numpy as np
import pandas as pd
import pytest

from agreement.core.annotators import annotator_agreement
from agreement.core.calibration import calibration
from agreement.core.correlation import correlation, mean_ratings, rating_correlation, score_correlation
from agreement.core.first_error import first_error_agreement, processbench_f1
from agreement.core.metrics import agreement_metrics
from agreement.core.pairs import paired_steps, paired_traces
from agreement.core.steps import agreement_by_position, disagreements, step_agreement
from tests.agreement.core.helpers import (
    STEP_CAND,
    STEP_REF,
    E,
    N,
    V,
    assert_reasons_consistent,
    find_nan,
    labels,
    scores,
)

approx = pytest.approx


# ---------------------------------------------------------------------------
# Step level
# ---------------------------------------------------------------------------
def test_step_level_hand_example():
    m = step_agreement(labels(STEP_REF), labels(STEP_CAND))
    # 10 pairs (t3 step 1 only has a reference verdict)
    assert m["steps_compared"] == 10
    # agreements: pairs 1-4, 6, 7, 9 -> 7 / 10
    assert m["percent_agreement"] == approx(0.7)
    # confusion (rows ref, cols cand):   V  E  N   | ref total
    #                               V:   4  1  0   | 5
    #                               E:   1  2  0   | 3
    #                               N:   1  0  1   | 2
    #                     cand total:    6  3  1
    assert m["confusion"] == {
        V: {V: 4, E: 1, N: 0},
        E: {V: 1, E: 2, N: 0},
        N: {V: 1, E: 0, N: 1},
    }
    # p_o = 0.7, p_e = (5*6 + 3*3 + 2*1) / 100 = 0.41
    # kappa = (0.7 - 0.41) / (1 - 0.41) = 0.29 / 0.59
    assert m["kappa"] == approx(0.29 / 0.59)
    # binary: ref invalid = 3 (t2 1-3), cand invalid = 3 (t1 5, t2 1-2)
    # p_o = (2 both invalid + 6 both not) / 10 = 0.8, p_e = 0.3*0.3 + 0.7*0.7 = 0.58
    # kappa_b = 0.22 / 0.42
    assert m["kappa_binary"] == approx(0.22 / 0.42)
    assert m["undefined"] == {}


def test_by_position_and_disagreements_hand_example():
    pos = agreement_by_position(labels(STEP_REF), labels(STEP_CAND))
    # step 1: t1 VV, t2 EE -> 2/2; step 3: t1 VV, t2 E->V -> 1/2;
    # step 5: t1 V->E, t2 N->V -> 0/2
    assert pos["step"].tolist() == [1, 2, 3, 4, 5]
    assert pos["steps"].tolist() == [2, 2, 2, 2, 2]
    assert pos["agree"].tolist() == [2, 2, 1, 2, 0]
    assert pos["agreement"].tolist() == approx([1, 1, 0.5, 1, 0])
    assert pos["reference_invalid"].tolist() == [1, 1, 1, 0, 0]
    assert pos["candidate_invalid"].tolist() == [1, 1, 0, 0, 1]

    d = disagreements(labels(STEP_REF), labels(STEP_CAND))
    assert list(d.columns) == ["trace_id", "step", "reference_verdict", "candidate_verdict"]
    assert [tuple(r) for r in d.itertuples(index=False)] == [
        ("t1", 5, V, E),
        ("t2", 3, E, V),
        ("t2", 5, N, V),
    ]


def test_verdicts_are_normalised_and_row_order_does_not_matter():
    cand = labels(STEP_CAND)
    cand["verdict"] = cand["verdict"].map(lambda v: f" {v.upper()} " if isinstance(v, str) else v)
    shuffled = cand.sample(frac=1, random_state=3)
    assert step_agreement(labels(STEP_REF).iloc[::-1], shuffled) == step_agreement(labels(STEP_REF), labels(STEP_CAND))


def test_step_level_no_overlap():
    m = step_agreement(labels([("a", 1, V)]), labels([("b", 1, V)]))
    assert m["steps_compared"] == 0
    assert m["percent_agreement"] is None and m["kappa"] is None and m["kappa_binary"] is None
    assert set(m["undefined"]) == {"percent_agreement", "kappa", "kappa_binary"}
    assert "no step" in m["undefined"]["kappa"]
    assert m["confusion"] == {a: {b: 0 for b in (V, E, N)} for a in (V, E, N)}
    assert agreement_by_position(labels([("a", 1, V)]), labels([("b", 1, V)])).empty
    assert disagreements(labels([]), labels([])).empty


def test_step_level_one_class_only():
    ref = labels([("a", i, V) for i in range(1, 4)])
    m = step_agreement(ref, ref)
    assert m["percent_agreement"] == 1.0
    # sklearn returns nan (expected agreement 1): reported as undefined
    assert m["kappa"] is None and "same verdict ('valid')" in m["undefined"]["kappa"]
    assert m["kappa_binary"] is None and "not invalid" in m["undefined"]["kappa_binary"]
    inv = labels([("a", i, E) for i in range(1, 4)])
    m = step_agreement(inv, inv)
    assert m["kappa"] is None and m["kappa_binary"] is None
    assert "'invalid'" in m["undefined"]["kappa_binary"]


def test_kappa_defined_when_only_one_source_is_constant():
    # ref all valid, cand 2 valid + 1 invalid: p_o = 2/3, p_e = 1 * 2/3 -> kappa 0
    ref = labels([("a", i, V) for i in range(1, 4)])
    cand = labels([("a", 1, V), ("a", 2, V), ("a", 3, E)])
    m = step_agreement(ref, cand)
    assert m["kappa"] == approx(0.0) and m["kappa_binary"] == approx(0.0)
    # total disagreement on two classes: p_o = 0, p_e = 0 -> kappa 0 (defined)
    m = step_agreement(labels([("a", 1, V)]), labels([("a", 1, E)]))
    assert m["kappa"] == approx(0.0) and m["percent_agreement"] == 0.0


def test_label_input_errors():
    with pytest.raises(ValueError, match="labelled twice"):
        step_agreement(labels([("a", 1, V), ("a", 1, E)]), labels([]))
    with pytest.raises(ValueError, match="verdict"):
        step_agreement(labels([("a", 1, "maybe")]), labels([]))
    with pytest.raises(ValueError, match="missing column"):
        step_agreement(pd.DataFrame({"trace_id": [1]}), labels([]))
    with pytest.raises(ValueError, match="confidence"):
        calibration(labels([("a", 1, V)]), labels([("a", 1, V, 1.5)], confidence=True))


def test_paired_steps_keeps_the_candidate_confidence():
    p = paired_steps(labels([("a", 1, V), ("a", 2, E)]), labels([("a", 2, E, 0.7), ("a", 1, N, None)], True))
    assert p["step"].tolist() == [1, 2]
    assert p["reference_verdict"].tolist() == [V, E]
    assert p["candidate_verdict"].tolist() == [N, E]
    assert np.isnan(p["confidence"].iloc[0]) and p["confidence"].iloc[1] == 0.7


# ---------------------------------------------------------------------------
# First error and ProcessBench
# ---------------------------------------------------------------------------
#            id   N  ref t*  cand t*   ref P  cand P
FE_ROWS = [
    ("a", 5, 2, 2, 1.0, 2.0),  # exact, within, error hit
    ("b", 5, 3, 4, 2.0, 1.0),  # within only, error miss
    ("c", 4, 1, None, 3.0, 4.0),  # none vs a number never agrees, error miss
    ("d", 3, None, None, 4.0, 3.0),  # exact, within, correct hit
    ("e", 3, None, 3, 5.0, 6.0),  # correct miss
    ("f", 6, 4, 4, 6.0, 5.0),  # exact, within, error hit
    ("g", 2, None, None, 7.0, 7.0),  # exact, within, correct hit
]


def fe_frames():
    ref = [(i, n, r, rp) for i, n, r, _, rp, _ in FE_ROWS]
    cand = [(i, n, c, cp) for i, n, _, c, _, cp in FE_ROWS]
    ref += [("h", 0, None, 0.0), ("i", 4, 2, 3.0), ("j", 3, None, 9.0)]  # h empty; j only here
    cand += [("h", 0, None, 0.0), ("i", 4, 2, 3.0, False)]  # i incomplete in the candidate
    return scores(ref), scores(cand)


def test_first_error_and_processbench_hand_example():
    m = first_error_agreement(*fe_frames())
    assert m["traces_compared"] == 7  # a..g
    assert m["first_error_exact"] == approx(4 / 7)  # a, d, f, g
    assert m["first_error_within_1"] == approx(5 / 7)  # + b
    assert m["pb_error_traces"] == 4 and m["pb_error_acc"] == approx(2 / 4)  # a, b, c, f: a, f hit
    assert m["pb_correct_traces"] == 3 and m["pb_correct_acc"] == approx(2 / 3)  # d, e, g: d, g hit
    # F1 = 2 * 1/2 * 2/3 / (1/2 + 2/3) = (2/3) / (7/6) = 4/7
    assert m["pb_f1"] == approx(4 / 7)
    assert m["undefined"] == {}


def test_paired_traces_selection_and_first_error_encodings():
    ref, cand = fe_frames()
    p = paired_traces(ref, cand)
    assert p["trace_id"].tolist() == list("abcdefg")
    assert p["reference_first_error"].isna().tolist() == [False, False, False, True, True, False, True]
    # 0, NaN and negative numbers (ProcessBench's -1) all mean "no error"
    ref2 = ref.assign(first_error=ref["first_error"].astype("float").fillna(-1))
    cand2 = cand.assign(first_error=cand["first_error"].astype("float").fillna(0))
    assert first_error_agreement(ref2, cand2) == first_error_agreement(ref, cand)
    # without a complete column every row counts (i then compares too)
    m = first_error_agreement(ref.drop(columns="complete"), cand.drop(columns="complete"))
    assert m["traces_compared"] == 8


def test_processbench_f1():
    assert processbench_f1(0.5, 2 / 3) == approx(4 / 7)
    assert processbench_f1(1.0, 1.0) == 1.0
    assert processbench_f1(0.0, 0.0) == 0.0  # harmonic mean of zeros
    assert processbench_f1(0.0, 1.0) == 0.0
    assert processbench_f1(None, 1.0) is None


def test_first_error_degenerate_cases():
    # nothing compared
    ref, cand = scores([("a", 0, None, 0.0)]), scores([("a", 0, None, 0.0)])
    m = first_error_agreement(ref, cand)
    assert m["traces_compared"] == 0
    for k in ("first_error_exact", "first_error_within_1", "pb_error_acc", "pb_correct_acc", "pb_f1"):
        assert m[k] is None and k in m["undefined"]
    # reference finds no error: error accuracy (and F1) undefined
    ok = scores([("a", 3, None, 1.0), ("b", 2, None, 2.0)])
    m = first_error_agreement(ok, scores([("a", 3, 1, 1.0), ("b", 2, None, 2.0)]))
    assert m["pb_correct_acc"] == 0.5 and m["pb_error_acc"] is None and m["pb_f1"] is None
    assert "none of the compared" in m["undefined"]["pb_error_acc"]
    assert "pb_error_acc" in m["undefined"]["pb_f1"]
    # reference finds an error everywhere: correct accuracy undefined
    bad = scores([("a", 3, 1, 1.0), ("b", 2, 2, 2.0)])
    m = first_error_agreement(bad, bad)
    assert m["pb_error_acc"] == 1.0 and m["pb_correct_acc"] is None and m["pb_f1"] is None
    assert "every compared trace" in m["undefined"]["pb_correct_acc"]


def test_score_input_errors():
    with pytest.raises(ValueError, match="n_steps 3 in the reference but 4"):
        first_error_agreement(scores([("a", 3, None, 1.0)]), scores([("a", 4, None, 1.0)]))
    with pytest.raises(ValueError, match="appears twice"):
        first_error_agreement(scores([("a", 3, None, 1.0), ("a", 3, None, 1.0)]), scores([]))
    with pytest.raises(ValueError, match="missing column"):
        first_error_agreement(scores([]).drop(columns="process"), scores([]))


# ---------------------------------------------------------------------------
# Correlations
# ---------------------------------------------------------------------------
def test_score_correlation_hand_example():
    m = score_correlation(*fe_frames(), n_resamples=200, seed=1)
    # ref P = 1..7 (deviations -3..3), cand P = 2,1,4,3,6,5,7 (deviations -2,-3,0,-1,2,1,3)
    # sum dx*dy = 6+6+0+0+2+2+9 = 25; sum dx^2 = sum dy^2 = 28 -> r = 25/28
    # both are already ranks, so Spearman's rho = 25/28 too
    assert m["n"] == 7
    assert m["pearson_r"] == approx(25 / 28)
    assert m["spearman_rho"] == approx(25 / 28)
    for k in ("pearson_ci", "spearman_ci"):
        lo, hi = m[k]
        assert -1 <= lo <= hi <= 1 and lo <= 25 / 28 <= hi


def test_correlation_degenerate_cases():
    for x, y, why in [
        ([], [], "fewer than 3 paired values (n = 0)"),
        ([1.0, 2.0], [2.0, 1.0], "fewer than 3 paired values (n = 2)"),
        ([1.0, 2.0, np.nan, 3.0], [1.0, None, 5.0, 3.0], "fewer than 3 paired values (n = 2)"),
        ([2.0, 2.0, 2.0, 2.0], [1.0, 2.0, 3.0, 4.0], "the x values are constant"),
        ([1.0, 2.0, 3.0], [5.0, 5.0, 5.0], "the y values are constant"),
    ]:
        m = correlation(x, y, n_resamples=50)
        for k in ("pearson_r", "pearson_ci", "spearman_rho", "spearman_ci"):
            assert m[k] is None and m["undefined"][k] == why, (x, y, k)
    with pytest.raises(ValueError, match="values but"):
        correlation([1, 2, 3], [1, 2])
    with pytest.raises(ValueError, match="n_resamples"):
        correlation([1, 2, 3], [1, 2, 3], n_resamples=0)
    with pytest.raises(ValueError, match="level"):
        correlation([1, 2, 3], [1, 2, 3], level=1.0)


def test_interval_is_none_when_every_resample_is_constant():
    # n = 3: a resample is constant with probability 1/9; find a seed where
    # the single resample is one, so no interval can be formed.
    x, y = [1.0, 2.0, 3.0], [1.0, 3.0, 2.0]
    for seed in range(200):
        idx = np.random.default_rng(seed).integers(0, 3, size=(1, 3))
        if len(set(idx[0])) == 1:
            break
    m = correlation(x, y, n_resamples=1, seed=seed)
    assert m["pearson_r"] == approx(0.5) and m["pearson_ci"] is None
    assert m["undefined"]["pearson_ci"] == "every bootstrap resample was constant"
    assert m["undefined"]["spearman_ci"] == "every bootstrap resample was constant"


def test_correlation_is_seeded():
    rng = np.random.default_rng(5)
    x = rng.normal(size=40)
    y = x + rng.normal(size=40)
    a = correlation(x, y, seed=11, n_resamples=300)
    assert a == correlation(x, y, seed=11, n_resamples=300)
    assert a["pearson_ci"] != correlation(x, y, seed=12, n_resamples=300)["pearson_ci"]
    assert a["pearson_r"] == correlation(x, y, seed=12, n_resamples=300)["pearson_r"]


def test_rating_correlation_hand_example():
    # mean ratings: a (4+6)/2 = 5, b 2, c 8, d 9 (d has no complete labels), e 7 (N = 0)
    ratings = pd.DataFrame(
        [
            ("a", "x", 4),
            ("a", "y", 6),
            ("b", "x", 2),
            ("b", "y", None),
            ("c", "x", 8),
            ("d", "x", 9),
            ("e", "x", 7),
        ],
        columns=["trace_id", "annotator", "rating"],
    )
    assert mean_ratings(ratings).to_dict() == {"a": 5.0, "b": 2.0, "c": 8.0, "d": 9.0, "e": 7.0}
    s = scores(
        [("a", 3, None, 6.0), ("b", 3, 1, 1.0), ("c", 2, None, 8.0), ("d", 3, None, 1.0, False), ("e", 0, None, 0.0)]
    )
    m = rating_correlation(ratings, s, n_resamples=100)
    # ratings (5, 2, 8) vs P (6, 1, 8): deviations (0, -3, 3) and (1, -4, 3)
    # sum = 0 + 12 + 9 = 21; sqrt(18 * 26) -> r = 21 / sqrt(468)
    assert m["n"] == 3
    assert m["pearson_r"] == approx(21 / np.sqrt(468))
    assert m["spearman_rho"] == approx(1.0)  # same order
    with pytest.raises(ValueError, match=r"within \[0, 10\]"):
        mean_ratings(pd.DataFrame({"trace_id": ["a"], "rating": [11]}))
    with pytest.raises(ValueError, match="must be a number"):
        mean_ratings(pd.DataFrame({"trace_id": ["a"], "rating": ["good"]}))
    m = rating_correlation(ratings.iloc[:0], s, n_resamples=10)
    assert m["pearson_r"] is None and "no rated trace" in m["undefined"]["pearson_r"]


# ---------------------------------------------------------------------------
# Several annotators
# ---------------------------------------------------------------------------
ANN_ROWS = [
    # item:   A  B  C
    # 1:      V  V  V
    # 2:      V  V  E
    # 3:      E  E  E
    # 4:      N  V  N
    ("t", 1, "A", V),
    ("t", 1, "B", V),
    ("t", 1, "C", V),
    ("t", 2, "A", V),
    ("t", 2, "B", V),
    ("t", 2, "C", E),
    ("u", 1, "A", E),
    ("u", 1, "B", E),
    ("u", 1, "C", E),
    ("u", 2, "A", N),
    ("u", 2, "B", V),
    ("u", 2, "C", N),
]


def ann(rows):
    return pd.DataFrame(rows, columns=["trace_id", "step", "annotator", "verdict"])


def test_annotator_agreement_hand_example():
    m = annotator_agreement(ann(ANN_ROWS).sample(frac=1, random_state=0))
    assert (m["annotators"], m["items"], m["items_paired"], m["ratings_per_item"]) == (3, 4, 4, 3)
    # Fleiss: counts [V, E, N] per item: [3,0,0] [2,1,0] [0,3,0] [1,0,2]
    # P_i = (sum n_ij^2 - 3) / 6 = 1, 1/3, 1, 1/3 -> P_bar = 2/3
    # p_j = 6/12, 4/12, 2/12 -> P_e = 1/4 + 1/9 + 1/36 = 7/18
    # kappa = (2/3 - 7/18) / (1 - 7/18) = 5/11
    assert m["fleiss_kappa"] == approx(5 / 11)
    # Krippendorff (nominal): coincidences o_VV = 3 + 1 = 4, o_EE = 3, o_NN = 1,
    # off-diagonal o_VE = o_EV = o_VN = o_NV = 1 (sum 4); n_V = 6, n_E = 4, n_N = 2, n = 12
    # alpha = 1 - (n - 1) * 4 / (n^2 - sum n_c^2) = 1 - 11 * 4 / (144 - 56) = 0.5
    assert m["krippendorff_alpha"] == approx(0.5)
    pk = m["pairwise_kappa"]
    assert pk["annotators"] == ["A", "B", "C"]
    # A-B: p_o = 3/4, p_e = (2*3 + 1*1 + 1*0)/16 = 7/16 -> 5/9
    # A-C: p_o = 3/4, p_e = (2*1 + 1*2 + 1*1)/16 = 5/16 -> 7/11
    # B-C: p_o = 2/4, p_e = (3*1 + 1*2 + 0*1)/16 = 5/16 -> 3/11
    k = pk["kappa"]
    assert k[0][0] is None and k[0][1] == approx(5 / 9) and k[1][0] == approx(5 / 9)
    assert k[0][2] == approx(7 / 11) and k[1][2] == approx(3 / 11)
    assert pk["steps"] == [[4, 4, 4], [4, 4, 4], [4, 4, 4]]
    assert m["undefined"] == {}


def test_annotator_agreement_degenerate_cases():
    one = annotator_agreement(ann([("t", 1, "A", V), ("t", 2, "A", E)]))
    assert one["krippendorff_alpha"] is None and "at least 2 annotators" in one["undefined"]["krippendorff_alpha"]
    assert one["fleiss_kappa"] is None and one["pairwise_kappa"]["kappa"] == [[None]]

    apart = annotator_agreement(ann([("t", 1, "A", V), ("t", 2, "B", E)]))  # no shared step
    assert "no step was labelled by two" in apart["undefined"]["krippendorff_alpha"]
    assert "no step was labelled by two" in apart["undefined"]["fleiss_kappa"]
    assert apart["undefined"]["pairwise_kappa[A|B]"] == "no step was labelled by both"

    same = annotator_agreement(ann([("t", s, a, V) for s in (1, 2) for a in "AB"]))
    assert (
        same["krippendorff_alpha"] is None and "expected disagreement is 0" in same["undefined"]["krippendorff_alpha"]
    )
    assert same["fleiss_kappa"] is None and "chance agreement is 1" in same["undefined"]["fleiss_kappa"]
    assert "same verdict ('valid')" in same["undefined"]["pairwise_kappa[A|B]"]

    # unequal numbers of ratings: Fleiss undefined, alpha fine; the step labelled
    # by one annotator only is left out of both
    rows = ANN_ROWS[:-1] + [("v", 1, "A", V)]
    m = annotator_agreement(ann(rows))
    assert m["fleiss_kappa"] is None and "2 to 3" in m["undefined"]["fleiss_kappa"]
    assert m["krippendorff_alpha"] is not None and m["items"] == 5 and m["items_paired"] == 4

    empty = annotator_agreement(ann([]))
    assert empty["annotators"] == 0 and empty["krippendorff_alpha"] is None

    with pytest.raises(ValueError, match="twice"):
        annotator_agreement(ann([("t", 1, "A", V), ("t", 1, "A", E)]))


# ---------------------------------------------------------------------------
# Calibration
# ---------------------------------------------------------------------------
def test_calibration_hand_example():
    ref = labels([("a", i, V) for i in range(1, 7)])
    cand = labels(
        [
            ("a", 1, V, 0.95),  # correct, bin 9
            ("a", 2, E, 0.91),  # wrong, bin 9
            ("a", 3, V, 0.55),  # correct, bin 5
            ("a", 4, V, 0.52),  # correct, bin 5
            ("a", 5, N, 0.05),  # wrong, bin 0
            ("a", 6, V, None),  # no confidence: left out
        ],
        confidence=True,
    )
    m = calibration(ref, cand)
    assert m["steps_calibrated"] == 5
    rel = {b["bin"]: b for b in m["reliability"]}
    assert len(rel) == 10 and [b["count"] for b in m["reliability"]] == [1, 0, 0, 0, 0, 2, 0, 0, 0, 2]
    assert rel[9]["mean_confidence"] == approx(0.93) and rel[9]["accuracy"] == 0.5
    assert rel[5]["mean_confidence"] == approx(0.535) and rel[5]["accuracy"] == 1.0
    assert rel[0]["mean_confidence"] == approx(0.05) and rel[0]["accuracy"] == 0.0
    assert rel[3]["mean_confidence"] is None and rel[3]["accuracy"] is None
    assert (rel[3]["lower"], rel[3]["upper"]) == approx((0.3, 0.4))
    # ECE = 2/5 |0.5 - 0.93| + 2/5 |1 - 0.535| + 1/5 |0 - 0.05| = 0.172 + 0.186 + 0.01
    assert m["ece"] == approx(0.368)
    # Brier = (0.05^2 + 0.91^2 + 0.45^2 + 0.48^2 + 0.05^2) / 5 = 1.266 / 5
    assert m["brier"] == approx(0.2532)


def test_calibration_bin_edges():
    ref = labels([("a", i, V) for i in range(1, 5)])
    cand = labels([("a", 1, V, 0.0), ("a", 2, V, 0.1), ("a", 3, V, 0.3), ("a", 4, V, 1.0)], confidence=True)
    counts = [b["count"] for b in calibration(ref, cand)["reliability"]]
    assert counts == [1, 1, 0, 1, 0, 0, 0, 0, 0, 1]  # 1.0 falls in the last bin
    perfect = calibration(ref, cand.assign(confidence=1.0))
    assert perfect["ece"] == 0.0 and perfect["brier"] == 0.0
    assert len(calibration(ref, cand, n_bins=4)["reliability"]) == 4


def test_calibration_without_confidences():
    ref = labels([("a", 1, V)])
    m = calibration(ref, labels([("a", 1, V)]))
    assert m["ece"] is None and m["undefined"]["ece"] == "the candidate reports no confidences"
    m = calibration(ref, labels([("a", 1, V, None)], confidence=True))
    assert m["brier"] is None and "no confidence on the steps" in m["undefined"]["brier"]
    m = calibration(ref, labels([("b", 1, V, 0.5)], confidence=True))
    assert m["undefined"]["ece"] == "no step was labelled by both sources"
    assert all(b["count"] == 0 for b in m["reliability"])


# ---------------------------------------------------------------------------
# The metrics object
# ---------------------------------------------------------------------------
REQUIRED = [
    "steps_compared",
    "percent_agreement",
    "kappa",
    "kappa_binary",
    "confusion",
    "traces_compared",
    "first_error_exact",
    "first_error_within_1",
    "pb_error_acc",
    "pb_correct_acc",
    "pb_f1",
    "pearson_r",
    "pearson_ci",
    "spearman_rho",
    "spearman_ci",
    "undefined",
]


def test_agreement_metrics_object():
    ref_s, cand_s = fe_frames()
    ref_l = labels(STEP_REF)
    cand_l = labels([r + (0.8,) for r in STEP_CAND], confidence=True)
    m = agreement_metrics(
        ref_l, cand_l, ref_s, cand_s, ratings=None, annotator_labels=ann(ANN_ROWS), n_resamples=200, seed=3
    )
    assert set(REQUIRED) <= set(m)
    assert m["steps_compared"] == 10 and m["kappa"] == approx(0.29 / 0.59)
    assert m["traces_compared"] == 7 and m["pb_f1"] == approx(4 / 7)
    assert m["pearson_r"] == approx(25 / 28) and len(m["pearson_ci"]) == 2
    assert m["steps_calibrated"] == 10 and m["ece"] == approx(abs(0.7 - 0.8))
    assert m["by_position"][2] == {
        "step": 3,
        "steps": 2,
        "agree": 1,
        "agreement": 0.5,
        "reference_invalid": 1,
        "candidate_invalid": 0,
    }
    assert m["annotators"]["fleiss_kappa"] == approx(5 / 11)
    assert m["bootstrap"] == {"n_resamples": 200, "seed": 3, "level": 0.95}
    assert "ratings" not in m and m["undefined"] == {}
    assert find_nan(m) is None
    json.dumps(m, allow_nan=False)  # JSON-ready: native types, no NaN
    assert m == agreement_metrics(
        ref_l, cand_l, ref_s, cand_s, annotator_labels=ann(ANN_ROWS), n_resamples=200, seed=3
    )  # deterministic
    assert_reasons_consistent(m)


def test_agreement_metrics_with_ratings_and_degenerate_everything():
    ref_s = scores([("a", 2, None, 5.0), ("b", 1, None, 5.0)])
    ref_l = labels([("a", 1, V), ("a", 2, V), ("b", 1, V)])
    ratings = pd.DataFrame({"trace_id": ["a", "b"], "rating": [3, 4]})
    m = agreement_metrics(ref_l, ref_l, ref_s, ref_s, ratings=ratings, n_resamples=20)
    assert m["percent_agreement"] == 1.0 and m["kappa"] is None
    assert m["first_error_exact"] == 1.0 and m["pb_correct_acc"] == 1.0 and m["pb_error_acc"] is None
    assert m["pearson_r"] is None and "fewer than 3" in m["undefined"]["pearson_r"]
    assert m["ece"] is None and m["undefined"]["ece"] == "the candidate reports no confidences"
    assert m["ratings"]["traces_rated"] == 2
    assert m["ratings"]["reference"]["pearson_r"] is None
    assert "fewer than 3" in m["undefined"]["ratings.candidate.spearman_ci"]
    assert find_nan(m) is None
    assert_reasons_consistent(m)


def test_agreement_metrics_derives_completeness_from_labels():
    # scores without a complete column: b lacks the candidate's label of step 2
    s = scores([("a", 2, None, 5.0), ("b", 2, None, 4.0), ("c", 1, 1, 1.0)]).drop(columns="complete")
    ref_l = labels([("a", 1, V), ("a", 2, V), ("b", 1, V), ("b", 2, V), ("c", 1, E)])
    cand_l = labels([("a", 1, V), ("a", 2, V), ("b", 1, V), ("c", 1, E)])
    m = agreement_metrics(ref_l, cand_l, s, s, n_resamples=10)
    assert m["traces_compared"] == 2  # a, c
    assert m["steps_compared"] == 4
