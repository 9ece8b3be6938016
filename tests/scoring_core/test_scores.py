"""Per-trace scores, every expected value derived by hand in the comments."""

import numpy as np
import pandas as pd
import pytest
from scoring_core_data import E, N, V, frames, worked_frames

from scoring.core.hazard import hazard_lookup, hazard_profile
from scoring.core.profile import DEFAULT, Profile, ablation
from scoring.core.scores import SCORE_COLUMNS, estimate_hazard, format_penalty, hazard_penalty, score_traces

approx = pytest.approx


def by_id(df):
    return df.set_index("trace_id")


# ---------------------------------------------------------------------------
# The worked example of docs/scoring.md
# ---------------------------------------------------------------------------
def test_worked_example_hazard():
    traces, steps = worked_frames()
    # Hazard set: complete traces with N >= 1 = A (4, t*=2), B (3, none),
    # C (5, t*=1), D (2, t*=2).  E is empty, F is incomplete.
    # t=1: n=4 d=1 h=1/4 | t=2: n=3 d=2 h=2/3 | t=3: n=1 d=0 | t=4,5: n=0 -> h=0
    t = estimate_hazard(traces, steps)
    assert t.at_risk.tolist() == [4, 3, 1, 0, 0]
    assert t.events.tolist() == [1, 2, 0, 0, 0]
    np.testing.assert_allclose(t.cum_hazard, [1 / 4, 11 / 12, 11 / 12, 11 / 12, 11 / 12])


def test_worked_example_scores():
    traces, steps = worked_frames()
    s = score_traces(traces, steps)
    assert list(s.columns) == SCORE_COLUMNS
    assert s.trace_id.tolist() == list("ABCDEF")
    s = by_id(s)
    H1, Hmax = 1 / 4, 11 / 12
    p_haz_t2 = 5 * (1 - H1 / Hmax)  # = 5 * (1 - 3/11) = 40/11 = 3.6364
    assert p_haz_t2 == approx(40 / 11)

    a = s.loc["A"]
    # C = {1} u {2, 7} restricted to 1..3 = {1, 2} -> 2; S_base = 10*2/3
    # P_fmt: N=4 > L=3 -> 1 * 1 * |4-3|/3 = 1/3
    # S_HCRS = 20/3 - 1/3 - 40/11 = 89/33 = 2.6970
    # S_PRM = 10 * 3/4 (neutral passes) = 7.5 ; S_PRM_haz = 7.5 - 40/11 = 85/22
    # holistic = 0.7 * 89/33 + 0.3 * 10 = 4.8879 ; lucky: a=1, 2.697 <= 3
    assert (a.coverage, a.first_error) == (2, 2)
    assert a.s_base == approx(20 / 3)
    assert a.p_fmt == approx(1 / 3)
    assert a.p_haz == approx(40 / 11)
    assert a.s_hcrs == approx(89 / 33)
    assert a.s_prm == approx(7.5)
    assert a.s_prm_haz == approx(85 / 22)
    assert a.process == approx(89 / 33)
    assert a.holistic == approx(0.7 * 89 / 33 + 3)
    assert a.lucky_guess and not a["empty"] and a.complete
    assert a.validity_rate == approx(0.75) and a.all_valid == False  # noqa: E712

    b = s.loc["B"]
    # C = 3, L = 4: S_base = 7.5 ; N=3 < L=4: P_fmt = 1 * 1.5 * 1/4 = 0.375
    # no error: P_haz = 0 ; S_HCRS = 7.125 ; holistic = 0.7*7.125 + 3 = 7.9875
    assert (b.coverage, b.s_base, b.p_fmt, b.p_haz) == (3, approx(7.5), approx(0.375), 0)
    assert pd.isna(b.first_error)
    assert b.s_hcrs == approx(7.125) and b.process == approx(7.125)
    assert b.s_prm == 10 and b.s_prm_haz == 10
    assert b.holistic == approx(7.9875) and not b.lucky_guess
    assert b.all_valid == True  # noqa: E712

    c = s.loc["C"]
    # L = 0: S_base, S_HCRS null, P_fmt 0 ; t*=1: P_haz = 5 * (1 - 0/Hmax) = 5
    # S_PRM = 10 * 4/5 = 8 ; S_PRM_haz = 3 = P (prm_hazard) ; holistic = 0.7*3 = 2.1
    assert np.isnan(c.s_base) and np.isnan(c.s_hcrs)
    assert (c.p_fmt, c.p_haz, c.s_prm, c.s_prm_haz) == (0, approx(5), approx(8), approx(3))
    assert c.process == approx(3) and c.holistic == approx(2.1) and not c.lucky_guess

    d = s.loc["D"]
    # C = 1 of L = 2: S_base = 5 ; N = L: P_fmt = 0 ; P_haz = 40/11
    # S_HCRS = 5 - 40/11 = 15/11 ; holistic = 0.7*15/11 + 3 = 3.9545 ; lucky
    assert d.s_base == approx(5) and d.p_fmt == 0 and d.p_haz == approx(40 / 11)
    assert d.s_hcrs == approx(15 / 11) and d.process == approx(15 / 11)
    assert d.s_prm == approx(5) and d.s_prm_haz == approx(15 / 11)
    assert d.holistic == approx(0.7 * 15 / 11 + 3) and d.lucky_guess

    e = s.loc["E"]
    # empty, L = 3: everything 0 ; holistic = 0.3 * 10 * 1 = 3 ; lucky (0 <= 3)
    assert e["empty"] and e.complete and e.coverage == 0
    assert (e.s_base, e.p_fmt, e.p_haz, e.s_hcrs, e.s_prm, e.s_prm_haz, e.process) == (0,) * 7
    assert e.holistic == approx(3.0) and e.lucky_guess
    assert np.isnan(e.validity_rate) and pd.isna(e.all_valid)

    f = s.loc["F"]
    # incomplete (steps 4-6 unlabelled, treated as neutral), excluded from the hazard
    # t*=1: P_haz = 5 ; S_PRM = 10 * 5/6 ; S_PRM_haz = 50/6 - 5 = 10/3 ; holistic = 0.7*10/3
    assert not f.complete and f.first_error == 1
    assert f.p_haz == approx(5) and f.s_prm == approx(50 / 6)
    assert f.process == approx(10 / 3) and f.holistic == approx(7 / 3)
    assert s.first_error.dtype == "Int64"


def test_worked_example_neutral_as_zero_and_prm_hazard_off():
    traces, steps = worked_frames()
    s = by_id(score_traces(traces, steps, Profile(neutral_as=0, prm_hazard=False)))
    # A: valid steps 1, 3 only: 10 * 2/4 = 5 ; S_PRM_haz = 5 - 40/11 = 15/11
    assert s.loc["A", "s_prm"] == approx(5) and s.loc["A", "s_prm_haz"] == approx(15 / 11)
    # A has L > 0: process is still S_HCRS
    assert s.loc["A", "process"] == approx(89 / 33)
    # C: L = 0, prm_hazard off -> P = S_PRM = 8 ; holistic 5.6
    assert s.loc["C", "process"] == approx(8) and s.loc["C", "holistic"] == approx(5.6)
    # F: valid 2 of 6 (unlabelled counts like neutral -> fails) = 10/3
    assert s.loc["F", "s_prm"] == approx(10 / 3)


# ---------------------------------------------------------------------------
# Single formulas
# ---------------------------------------------------------------------------
def test_coverage_counts_valid_steps_and_refs_within_1_to_L():
    traces, steps = frames(
        [("t", 5, 3, True)],
        [
            ("t", 1, V, [1, 4, 0]),  # 4 > L and 0 < 1 ignored -> {1}
            ("t", 2, N, [2]),  # neutral: no coverage
            ("t", 3, E, [3]),  # invalid: no coverage
            ("t", 4, V, (1,)),  # duplicate of 1
            ("t", 5, V, [2.5, None]),  # not integers
        ],
    )
    s = score_traces(traces, steps).iloc[0]
    # C = |{1}| = 1 ; S_base = 10/3
    assert s.coverage == 1 and s.s_base == approx(10 / 3)
    steps.at[4, "skeleton_refs"] = [2.0, 3]
    s = score_traces(traces, steps).iloc[0]
    assert s.coverage == 3 and s.s_base == approx(10)  # {1, 2, 3}


def test_refs_in_odd_containers():
    traces, steps = frames(
        [("t", 3, 4, True)],
        [("t", 1, V, np.array([1])), ("t", 2, V, None), ("t", 3, V, 2)],
    )
    # np.array, None and a bare int: {1, 2} -> C = 2
    assert score_traces(traces, steps).iloc[0].coverage == 2


@pytest.mark.parametrize(
    "n, L, profile, expected",
    [
        (5, 4, DEFAULT, 0.25),  # N > L: 1 * 1 * 1/4
        (2, 4, DEFAULT, 0.75),  # N < L: 1 * 1.5 * 2/4
        (4, 4, DEFAULT, 0.0),  # N = L
        (20, 4, DEFAULT, 4.0),  # 16/4 = 4 = alpha exactly
        (30, 4, DEFAULT, 4.0),  # 26/4 = 6.5 -> capped at alpha = 4
        (1, 100, Profile(beta=3), 4.0),  # 3 * 1.5 * 99/100 = 4.455 -> 4
        (1, 100, DEFAULT, 1.485),  # 1.5 * 99/100
        (3, 4, Profile(eta=2), 0.5),  # 2 * 1/4
        (30, 4, Profile(alpha=10), 6.5),
        (7, 0, DEFAULT, 0.0),  # no skeleton
        (0, 4, DEFAULT, 0.0),  # empty trace
        (30, 4, Profile(beta=0), 0.0),  # ablation
    ],
)
def test_format_penalty(n, L, profile, expected):
    assert format_penalty([n], [L], profile)[0] == approx(expected)
    traces, steps = frames([("t", n, L, False)], [("t", i, V, []) for i in range(1, n + 1)])
    assert score_traces(traces, steps, profile).iloc[0].p_fmt == approx(expected)


def test_hazard_penalty_with_pinned_vector():
    # h = 0.1, 0.2, 0.3, 0.4 -> H = 0.1, 0.3, 0.6, 1.0 ; H_max = 1
    lk = hazard_lookup([0.1, 0.2, 0.3, 0.4])
    # t*=1: 5*(1-0) = 5 ; t*=2: 5*(1-0.1) = 4.5 ; t*=3: 5*0.7 = 3.5 ; t*=4: 5*0.4 = 2
    # t*=9 (beyond the vector): H(8) = H_max -> 0 ; none (0 / NaN): 0
    got = hazard_penalty([1, 2, 3, 4, 9, 0, np.nan], lk, DEFAULT)
    np.testing.assert_allclose(got, [5, 4.5, 3.5, 2, 0, 0, 0])
    # omega = 8 is capped by C_haz = 5 at t*=1 ; t*=3: 8*0.7 = 5.6 -> 5 ; t*=4: 3.2
    np.testing.assert_allclose(hazard_penalty([1, 3, 4], lk, Profile(omega=8)), [5, 5, 3.2])
    np.testing.assert_allclose(hazard_penalty([1, 4], lk, Profile(omega=3)), [3, 1.2])
    np.testing.assert_allclose(hazard_penalty([1, 4], lk, ablation("no-hazard")), [0, 0])
    # H_max = 0 -> no penalty even with an error
    assert hazard_penalty([1], hazard_lookup([0.0, 0.0]), DEFAULT)[0] == 0


def test_pinned_hazard_replaces_estimate_and_given_table():
    traces, steps = frames(
        [("p", 4, 0, True)],
        [("p", 1, V, []), ("p", 2, N, []), ("p", 3, N, []), ("p", 4, E, [])],
    )
    prof = Profile(pinned_hazard=[0.1, 0.2, 0.3, 0.4])
    other = hazard_profile([4], [1])  # would give H(3)/H_max = 1 -> P_haz 0
    for hz in (None, other):
        s = score_traces(traces, steps, prof, hazard=hz).iloc[0]
        # t*=4: P_haz = 5 * (1 - 0.6/1.0) = 2
        # S_PRM = 10 * 3/4 = 7.5 (neutral passes) ; S_PRM_haz = 5.5 = P (L=0)
        # holistic = 0.7 * 5.5 + 3 = 6.85
        assert s.p_haz == approx(2) and s.s_prm == approx(7.5)
        assert s.s_prm_haz == approx(5.5) and s.process == approx(5.5)
        assert s.holistic == approx(6.85)
    s = score_traces(traces, steps, prof.replace(neutral_as=0)).iloc[0]
    # S_PRM = 10 * 1/4 = 2.5 ; S_PRM_haz = 2.5 - 2 = 0.5
    assert s.s_prm == approx(2.5) and s.s_prm_haz == approx(0.5)
    s = score_traces(traces, steps, prof.replace(prm_hazard=False)).iloc[0]
    # process = S_PRM = 7.5 ; holistic = 0.7 * 7.5 + 3 = 8.25
    assert s.process == approx(7.5) and s.holistic == approx(8.25)
    # the given table is used when nothing is pinned: H = [0,0,0,0]+... only t=1 has h=1
    # -> H(3) = 1 = H_max -> P_haz = 0
    assert score_traces(traces, steps, hazard=other).iloc[0].p_haz == 0


def test_s_hcrs_is_clipped_at_zero():
    # one trace N=10, L=2: step 1 invalid, steps 2-10 valid citing 1
    # C = 1 -> S_base = 5 ; P_fmt = min(4, 8/2 = 4) = 4
    # hazard from this trace alone: h_1 = 1/1 -> H_max = 1 ; t*=1 -> P_haz = 5
    # 5 - 4 - 5 = -4 -> S_HCRS = 0
    traces, steps = frames([("t", 10, 2, True)], [("t", 1, E, [])] + [("t", i, V, [1]) for i in range(2, 11)])
    s = score_traces(traces, steps).iloc[0]
    assert (s.s_base, s.p_fmt, s.p_haz, s.s_hcrs, s.process) == (5, 4, 5, 0, 0)
    # S_PRM = 9 ; S_PRM_haz = 4 (not the process score since L > 0)
    assert s.s_prm == approx(9) and s.s_prm_haz == approx(4)
    # no-penalties ablation: S_HCRS = S_base
    assert score_traces(traces, steps, ablation("no-penalties")).iloc[0].s_hcrs == 5


def test_no_errors_anywhere_gives_no_hazard_penalty():
    traces, steps = frames(
        [("a", 2, 2, True), ("b", 3, 0, False)],
        [("a", 1, V, [1]), ("a", 2, N, [2]), ("b", 1, V, []), ("b", 2, V, []), ("b", 3, N, [])],
    )
    s = score_traces(traces, steps)
    assert (s.p_haz == 0).all() and s.first_error.isna().all()
    # a: C = 1 -> S_base 5 = S_HCRS ; b: S_PRM = 10 = S_PRM_haz
    assert s.s_hcrs.iloc[0] == 5 and s.process.tolist() == [5, 10]
    assert estimate_hazard(traces, steps).hazard.eq(0).all()


def test_error_at_step_one_gets_the_maximum_penalty():
    # two traces: x (3, t*=1), y (3, t*=3): t=1 n=2 d=1 h=.5 ; t=2 n=1 d=0 ; t=3 n=1 d=1 h=1
    # H_max = 1.5 ; x: 5*(1-0) = 5 ; y: 5*(1 - H(2)/1.5) = 5*(1 - .5/1.5) = 10/3
    traces, steps = frames(
        [("x", 3, 0, True), ("y", 3, 0, True)],
        [("x", 1, E, []), ("x", 2, V, []), ("x", 3, V, []), ("y", 1, V, []), ("y", 2, V, []), ("y", 3, E, [])],
    )
    s = by_id(score_traces(traces, steps))
    assert s.loc["x", "p_haz"] == approx(5) and s.loc["y", "p_haz"] == approx(10 / 3)


def test_a_trace_longer_than_any_other():
    # X (2, t*=1), Y (5, t*=5): t=1 n=2 d=1 h=.5 ; t=2..4: n=1 d=0 ; t=5: n=1 d=1 h=1
    # H = .5 .5 .5 .5 1.5 ; Y: P_haz = 5*(1 - H(4)/1.5) = 5*(1 - 1/3) = 10/3
    traces, steps = frames(
        [("X", 2, 0, False), ("Y", 5, 0, False)],
        [("X", 1, E, []), ("X", 2, V, [])] + [("Y", i, V, []) for i in range(1, 5)] + [("Y", 5, E, [])],
    )
    hz = estimate_hazard(traces, steps)
    assert hz.at_risk.tolist() == [2, 1, 1, 1, 1] and hz.events.tolist() == [1, 0, 0, 0, 1]
    assert by_id(score_traces(traces, steps)).loc["Y", "p_haz"] == approx(10 / 3)
    # Scoring a longer trace Z (N=8) against this table: H beyond step 5 stays H_max.
    tz, sz = frames([("Z", 8, 0, False)], [("Z", i, V if i < 6 else E, []) for i in range(1, 9)])
    # t*=6: H(5) = H_max -> P_haz = 0
    assert score_traces(tz, sz, hazard=hz).iloc[0].p_haz == 0
    sz.loc[sz.step == 5, "verdict"] = E  # t*=5: 10/3 as for Y
    assert score_traces(tz, sz, hazard=hz).iloc[0].p_haz == approx(10 / 3)


def test_incomplete_traces_are_excluded_from_the_hazard_estimate():
    # P complete (2, t*=2); Q incomplete (3 steps, only step 1 labelled invalid).
    # Estimate from P only: t=1 n=1 d=0 ; t=2 n=1 d=1 h=1 -> H(1)=0, H_max=1
    # P: 5 * (1 - 0/1) = 5 (had Q counted: H = .5, 1.5 -> 5*(1-1/3) = 10/3)
    # Q: t*=1 -> 5 ; S_PRM = 10 * 2/3 (unlabelled like neutral)
    traces, steps = frames(
        [("P", 2, 0, True), ("Q", 3, 0, True)],
        [("P", 1, V, []), ("P", 2, E, []), ("Q", 1, E, []), ("Q", 2, None, [])],
    )
    s = by_id(score_traces(traces, steps))
    assert s.loc["P", "p_haz"] == approx(5) and s.loc["Q", "p_haz"] == approx(5)
    assert s.loc["P", "complete"] and not s.loc["Q", "complete"]
    assert s.loc["Q", "s_prm"] == approx(20 / 3)
    assert estimate_hazard(traces, steps).at_risk.tolist() == [1, 1]


def test_empty_traces():
    traces, steps = frames(
        [("e1", 0, 0, True), ("e2", 0, 0, False), ("e3", 0, 5, False)],
        [("e1", 1, E, [1])],  # outside 1..N: ignored
    )
    s = by_id(score_traces(traces, steps))
    assert s["empty"].all() and s.complete.all() and s.first_error.isna().all()
    # L = 0: S_base / S_HCRS null ; P = 0 ; holistic = 0.3*10*a
    assert np.isnan(s.loc["e1", "s_base"]) and np.isnan(s.loc["e1", "s_hcrs"])
    assert s.loc["e1", "process"] == 0 and s.loc["e1", "holistic"] == approx(3)
    assert s.loc["e1", "lucky_guess"] and not s.loc["e2", "lucky_guess"]
    assert s.loc["e2", "holistic"] == 0
    # L = 5: S_base = S_HCRS = 0, P_fmt = 0 despite |N - L| = 5
    assert (s.loc["e3", "s_base"], s.loc["e3", "s_hcrs"], s.loc["e3", "p_fmt"]) == (0, 0, 0)
    # no hazard data at all
    assert len(estimate_hazard(traces, steps)) == 0


@pytest.mark.parametrize(
    "n_valid, a, tau, lucky",
    [
        (3, True, 3.0, True),  # P = 10 * 3/10 = 3.0 <= 3
        (4, True, 3.0, False),  # P = 4
        (3, True, 2.9, False),
        (0, False, 3.0, False),  # P = 0 but wrong answer
        (10, True, 10.0, True),  # P = 10 <= 10
    ],
)
def test_lucky_guess_boundary(n_valid, a, tau, lucky):
    # L = 0, prm_hazard off -> P = S_PRM = 10 * valid / 10 (invalid steps fail)
    traces, steps = frames(
        [("t", 10, 0, a)],
        [("t", i, V if i <= n_valid else E, []) for i in range(1, 11)],
    )
    s = score_traces(traces, steps, Profile(prm_hazard=False, tau=tau)).iloc[0]
    assert s.process == approx(n_valid) and bool(s.lucky_guess) is lucky


def test_lucky_guess_tolerates_float_noise():
    # N=14, L=3, all valid citing {1, 2}: C=2 -> S_base = 20/3 ;
    # P_fmt = 1 * 1 * 11/3 = 11/3 (< 4) ; S_HCRS = 20/3 - 11/3 = 3 exactly,
    # but in floats 6.666666666666667 - 3.6666666666666665 = 3.0000000000000004
    traces, steps = frames([("t", 14, 3, True)], [("t", i, V, [1, 2]) for i in range(1, 15)])
    s = score_traces(traces, steps).iloc[0]
    assert s.process == approx(3) and s.process > 3.0  # the float noise is real
    assert s.lucky_guess  # 3 <= tau = 3 in exact arithmetic


def test_input_validation():
    traces, steps = frames([("t", 2, 1, True)], [("t", 1, V, []), ("t", 1, E, [])])
    with pytest.raises(ValueError, match="twice"):
        score_traces(traces, steps)
    with pytest.raises(ValueError, match="^verdict:"):
        score_traces(traces, steps.assign(verdict=["valid", "bogus"]))
    with pytest.raises(ValueError, match="trace_id"):
        score_traces(pd.concat([traces, traces]), steps.iloc[:1])
    with pytest.raises(ValueError, match="^answer_correct:"):
        score_traces(traces.assign(answer_correct=[None]), steps.iloc[:1])
    with pytest.raises(ValueError, match="^n_steps:"):
        score_traces(traces.assign(n_steps=[-1]), steps.iloc[:1])
    with pytest.raises(ValueError, match="missing column"):
        score_traces(traces.drop(columns="l_gold"), steps)


def test_tolerant_inputs():
    # null L = no skeleton; 0/1 answers; unknown trace ids and out-of-range steps ignored;
    # verdict case/blanks normalised; no skeleton_refs column at all
    traces = pd.DataFrame({"trace_id": [1, 2], "n_steps": [2, 1], "l_gold": [None, 2], "answer_correct": [1, 0]})
    steps = pd.DataFrame(
        {
            "trace_id": [1, 1, 2, 99, 1],
            "step": [1, 2, 1, 1, 3],
            "verdict": ["Valid", " invalid", "valid", "invalid", "invalid"],
        }
    )
    s = score_traces(traces, steps)
    assert s.l_gold.tolist() == [0, 2] and s.answer_correct.tolist() == [True, False]
    assert s.first_error.tolist() == [2, pd.NA] and s.complete.tolist() == [True, True]
    assert s.coverage.tolist() == [0, 0]
    # no steps table at all: nothing labelled
    s = score_traces(traces, None)
    assert s.complete.tolist() == [False, False] and (s.p_haz == 0).all()


def test_empty_traces_table():
    traces = pd.DataFrame({"trace_id": [], "n_steps": [], "l_gold": [], "answer_correct": pd.Series([], dtype=bool)})
    s = score_traces(traces, None)
    assert len(s) == 0 and list(s.columns) == SCORE_COLUMNS


def test_score_traces_is_vectorised_100k_traces_1m_steps():

    rng = np.random.default_rng(0)
    n, per = 100_000, 10
    traces = pd.DataFrame(
        {
            "trace_id": np.arange(n),
            "n_steps": per,
            "l_gold": rng.integers(0, 12, n),
            "answer_correct": rng.random(n) < 0.6,
        }
    )
    steps = pd.DataFrame(
        {
            "trace_id": np.repeat(np.arange(n), per),
            "step": np.tile(np.arange(1, per + 1), n),
            "verdict": rng.choice(np.array([V, E, N], dtype=object), n * per, p=[0.8, 0.1, 0.1]),
            "skeleton_refs": [[int(x)] for x in rng.integers(1, 12, n * per)],
        }
    )
    s = score_traces(traces, steps)  # speed: benchmarks/score_large.py
    assert len(s) == n and s.complete.all()
