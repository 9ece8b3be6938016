import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from lifelines import KaplanMeierFitter, NelsonAalenFitter

from scoring.core.hazard import (
    HAZARD_COLUMNS,
    hazard_from_scores,
    hazard_lookup,
    hazard_profile,
    pinned_hazard_table,
)


def test_hand_computed_table():
    # traces (N, t*): A (4, 2), B (3, none), C (5, 1), D (2, 2), E (0, none: empty, dropped)
    # exit step (t* or N): A 2, B 3, C 1, D 2
    # t=1: at risk A,B,C,D = 4, events C = 1      -> h = 1/4
    # t=2: at risk A,B,D   = 3, events A,D = 2    -> h = 2/3
    # t=3: at risk B       = 1, events 0          -> h = 0
    # t=4, 5: nobody at risk (C, the only trace that long, erred at 1) -> h = 0 by definition
    # H = 1/4, 11/12, 11/12, 11/12, 11/12 ; S = 3/4, 1/4, 1/4, 1/4, 1/4
    t = hazard_profile([4, 3, 5, 2, 0], [2, np.nan, 1, 2, 0])
    assert list(t.columns) == HAZARD_COLUMNS
    assert t.step.tolist() == [1, 2, 3, 4, 5]
    assert t.at_risk.tolist() == [4, 3, 1, 0, 0]
    assert t.events.tolist() == [1, 2, 0, 0, 0]
    np.testing.assert_allclose(t.hazard, [1 / 4, 2 / 3, 0, 0, 0])
    np.testing.assert_allclose(t.cum_hazard, [1 / 4, 11 / 12, 11 / 12, 11 / 12, 11 / 12])
    np.testing.assert_allclose(t.survival, [3 / 4, 1 / 4, 1 / 4, 1 / 4, 1 / 4])


def test_accepts_nullable_first_errors():
    a = hazard_profile(pd.Series([4, 3]), pd.array([2, pd.NA], dtype="Int64"))
    b = hazard_profile([4, 3], [2, None])
    c = hazard_profile([4, 3], [2, 0])
    pd.testing.assert_frame_equal(a, b)
    pd.testing.assert_frame_equal(a, c)


def test_no_errors_anywhere():
    t = hazard_profile([3, 1, 2], [0, 0, 0])
    assert t.at_risk.tolist() == [3, 2, 1] and t.events.tolist() == [0, 0, 0]
    assert (t.hazard == 0).all() and (t.survival == 1).all()
    assert hazard_lookup(t).h_max == 0


def test_empty_input():
    t = hazard_profile([0, 0], [0, 0])
    assert len(t) == 0 and list(t.columns) == HAZARD_COLUMNS
    lk = hazard_lookup(t)
    assert lk.h_max == 0 and lk(0) == 0 and lk(5) == 0


def test_bad_input():
    with pytest.raises(ValueError, match="first_error"):
        hazard_profile([2], [3])  # error after the last step
    with pytest.raises(ValueError, match="n_steps"):
        hazard_profile([-1], [0])
    with pytest.raises(ValueError, match="first_error"):
        hazard_profile([2, 3], [1])


def test_lookup():
    lk = hazard_lookup(hazard_profile([4, 3, 5, 2], [2, 0, 1, 2]))
    assert lk.t_max == 5
    assert lk(0) == 0  # H(0) = 0
    assert lk(1) == pytest.approx(0.25)
    assert lk.h_max == pytest.approx(11 / 12)
    np.testing.assert_allclose(lk([0, 1, 2, 99, -3]), [0, 0.25, 11 / 12, 11 / 12, 0])
    # from a plain vector, and a table with a gap (missing step = h 0)
    assert hazard_lookup([0.1, 0.2]).h_max == pytest.approx(0.3)
    gap = pd.DataFrame({"step": [1, 3], "hazard": [0.5, 0.25]})
    np.testing.assert_allclose(hazard_lookup(gap).H, [0, 0.5, 0.5, 0.75])


def test_pinned_table():
    t = pinned_hazard_table([0.1, 0.2, 0.5])
    np.testing.assert_allclose(t.cum_hazard, [0.1, 0.3, 0.8])
    np.testing.assert_allclose(t.survival, [0.9, 0.72, 0.36])  # 0.9, 0.9*0.8, 0.72*0.5
    assert t.at_risk.isna().all() and t.events.isna().all()
    with pytest.raises(ValueError):
        pinned_hazard_table([1.2])


def test_hazard_from_scores_uses_complete_nonempty_traces():
    scored = pd.DataFrame(
        {
            "n_steps": [2, 3, 0, 2],
            "first_error": pd.array([1, pd.NA, pd.NA, 2], dtype="Int64"),
            "complete": [True, True, True, False],
        }
    )
    t = hazard_from_scores(scored)
    # traces (2, 1) and (3, none): t=1: n=2, d=1; t=2: n=1; t=3: n=1
    assert t.at_risk.tolist() == [2, 1, 1] and t.events.tolist() == [1, 0, 0]


def _lifelines(n, fe):
    keep = n >= 1
    n, fe = n[keep], fe[keep]
    event = fe > 0
    durations = np.where(event, fe, n)
    timeline = np.arange(1, n.max() + 1)
    na = NelsonAalenFitter(nelson_aalen_smoothing=False).fit(durations, event, timeline=timeline)
    km = KaplanMeierFitter().fit(durations, event, timeline=timeline)
    return na.cumulative_hazard_.iloc[:, 0].to_numpy(), km.survival_function_.iloc[:, 0].to_numpy()


def test_matches_lifelines_on_the_hand_example():
    n, fe = np.array([4, 3, 5, 2]), np.array([2, 0, 1, 2])
    t = hazard_profile(n, fe)
    cum, surv = _lifelines(n, fe)
    np.testing.assert_allclose(t.cum_hazard, cum)
    np.testing.assert_allclose(t.survival, surv)


def test_matches_lifelines_on_random_study():
    rng = np.random.default_rng(7)
    n = rng.integers(0, 25, 2000)
    err = rng.random(2000) < 0.5
    fe = np.where(err & (n > 0), (rng.random(2000) * np.maximum(n, 1)).astype(int) + 1, 0)
    t = hazard_profile(n, fe)
    cum, surv = _lifelines(n, fe)
    np.testing.assert_allclose(t.cum_hazard, cum, rtol=1e-10)
    np.testing.assert_allclose(t.survival, surv, rtol=1e-10)


@settings(max_examples=40, deadline=None)
@given(
    st.lists(
        st.integers(1, 8).flatmap(lambda n: st.tuples(st.just(n), st.integers(0, n))),
        min_size=1,
        max_size=30,
    )
)
def test_matches_lifelines_property(pairs):
    n = np.array([p[0] for p in pairs])
    fe = np.array([p[1] for p in pairs])
    t = hazard_profile(n, fe)
    cum, surv = _lifelines(n, fe)
    np.testing.assert_allclose(t.cum_hazard, cum, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(t.survival, surv, rtol=1e-10, atol=1e-12)


def test_hazard_counts_of_chunks_add_up_to_the_table_of_the_whole():
    from scoring.core.hazard import add_hazard_counts, hazard_counts, hazard_from_counts

    rng = np.random.default_rng(3)
    n = rng.integers(1, 12, size=500)
    fe = np.where(rng.random(500) < 0.4, rng.integers(1, 13, size=500) % (n + 1), 0)
    whole = hazard_profile(n, fe)
    total = (np.zeros(0, np.int64), np.zeros(0, np.int64))
    for lo in range(0, 500, 37):  # chunks of different longest traces
        total = add_hazard_counts(total, hazard_counts(n[lo:lo + 37], fe[lo:lo + 37]))
    pd.testing.assert_frame_equal(hazard_from_counts(*total), whole, check_exact=True)
    assert len(hazard_from_counts(*hazard_counts(np.zeros(0, np.int64), np.zeros(0, np.int64)))) == 0
