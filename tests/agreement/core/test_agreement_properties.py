"""Hypothesis properties of the agreement metrics object: never a NaN, never
a crash, every undefined metric explained, every value in range."""

import json

import pandas as pd
from hypothesis import given, settings
from hypothesis import strategies as st

from agreement.core.metrics import agreement_metrics
from scoring.core.scores import score_traces
from tests.agreement.core.helpers import assert_reasons_consistent, find_nan

verdict = st.sampled_from(["valid", "invalid", "neutral", None])


@st.composite
def two_sources(draw):
    n_traces = draw(st.integers(0, 8))
    traces, ref, cand, ann, ratings = [], [], [], [], []
    with_conf = draw(st.booleans())
    for t in range(n_traces):
        n = draw(st.integers(0, 6))
        traces.append((t, n, draw(st.integers(0, 4)), draw(st.booleans())))
        for i in range(1, n + 1):
            ref.append((t, i, draw(verdict)))
            conf = draw(st.one_of(st.none(), st.floats(0, 1)))
            cand.append((t, i, draw(verdict), conf))
            for a in draw(st.lists(st.sampled_from("ABC"), unique=True, max_size=3)):
                ann.append((t, i, a, draw(verdict)))
        for _ in range(draw(st.integers(0, 2))):
            ratings.append((t, draw(st.one_of(st.none(), st.integers(0, 10)))))
    traces = pd.DataFrame(traces, columns=["trace_id", "n_steps", "l_gold", "answer_correct"])
    ref = pd.DataFrame(ref, columns=["trace_id", "step", "verdict"])
    cand = pd.DataFrame(cand, columns=["trace_id", "step", "verdict", "confidence"])
    if not with_conf:
        cand = cand.drop(columns="confidence")
    ann = pd.DataFrame(ann, columns=["trace_id", "step", "annotator", "verdict"])
    ratings = pd.DataFrame(ratings, columns=["trace_id", "rating"])
    return traces, ref, cand, ann, ratings


def in_unit(v, lo=0.0):
    return v is None or lo - 1e-12 <= v <= 1 + 1e-12


@settings(max_examples=50, deadline=None)
@given(two_sources(), st.integers(0, 3))
def test_metrics_object_is_total_and_clean(data, seed):
    traces, ref, cand, ann, ratings = data
    rs, cs = score_traces(traces, ref), score_traces(traces, cand)
    m = agreement_metrics(ref, cand, rs, cs, ratings=ratings, annotator_labels=ann, n_resamples=20, seed=seed)
    assert find_nan(m) is None
    json.dumps(m, allow_nan=False)
    assert_reasons_consistent(m)

    for k in ("percent_agreement", "first_error_exact", "first_error_within_1", "pb_error_acc"):
        assert in_unit(m[k]), k
    for k in ("pb_correct_acc", "pb_f1", "ece", "brier"):
        assert in_unit(m[k]), k
    for k in ("kappa", "kappa_binary", "pearson_r", "spearman_rho"):
        assert in_unit(m[k], lo=-1.0), k
    for k in ("pearson_ci", "spearman_ci"):
        if m[k] is not None:
            lo, hi = m[k]
            assert -1 - 1e-12 <= lo <= hi <= 1 + 1e-12
    assert m["first_error_within_1"] is None or m["first_error_within_1"] >= m["first_error_exact"]
    assert sum(sum(r.values()) for r in m["confusion"].values()) == m["steps_compared"]
    assert sum(p["steps"] for p in m["by_position"]) == m["steps_compared"]
    assert m["traces_compared"] <= int((traces["n_steps"] >= 1).sum())
    assert m["steps_calibrated"] <= m["steps_compared"]
    assert m["steps_calibrated"] == sum(b["count"] for b in m["reliability"])
    assert m["pb_error_traces"] + m["pb_correct_traces"] == m["traces_compared"]
    if m["pb_error_acc"] is not None and m["pb_correct_acc"] is not None:
        assert min(m["pb_error_acc"], m["pb_correct_acc"]) - 1e-12 <= m["pb_f1"]
        assert m["pb_f1"] <= max(m["pb_error_acc"], m["pb_correct_acc"]) + 1e-12
    a = m["annotators"]
    assert in_unit(a["fleiss_kappa"], lo=-1.0) and (a["krippendorff_alpha"] is None or a["krippendorff_alpha"] <= 1)


@settings(max_examples=15, deadline=None)
@given(two_sources())
def test_source_against_itself_agrees_perfectly(data):
    traces, ref, _, _, _ = data
    rs = score_traces(traces, ref)
    m = agreement_metrics(ref, ref, rs, rs, n_resamples=10)
    if m["steps_compared"]:
        assert m["percent_agreement"] == 1.0
        assert m["kappa"] in (None, 1.0)
    if m["traces_compared"]:
        assert m["first_error_exact"] == 1.0 and m["pb_f1"] in (None, 1.0)
    if m["pearson_r"] is not None:
        assert abs(m["pearson_r"] - 1.0) < 1e-12 and abs(m["spearman_rho"] - 1.0) < 1e-12
